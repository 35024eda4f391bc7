package natsinbox

import (
	"fmt"
	"maps"
)

// The roster is the configured agents and their inputs. A config reload
// changes it while the router runs: it is replaced whole (copy on write),
// so the router, the readers and the purger each see one roster or the
// next, never half of one.
//
// Guarantees of a reload:
//   - Retarget hands an agent's input to a new loop without losing a wake:
//     the new target is notified once it is in place.
//   - AddAgent: the new agent's input is read from its stored cursors, so
//     an agent removed and added again resumes where it stopped; messages
//     of it that wait in the log are found by the reader (a hint at the
//     router's position), new ones are routed to it.
//   - RemoveAgent: the agent is no longer served; what waits for it stays
//     in the log, and its cursors stay in the store. Input that arrives
//     for it afterwards is input for an unknown agent: dead-lettered with
//     that reason, as after a restart without it.
//
// Not supported: adding or removing an agent with subscribe: subjects
// (their purge floors are shared with other agents and laid out at
// start); AddAgent refuses one.

// targetRef boxes a Target for atomic.Value (which wants one concrete
// type).
type targetRef struct{ Target }

// to is the agent's current target.
func (a *agentLog) to() Target { return a.target.Load().(targetRef).Target }

// agent returns the named agent's inputs, or nil.
func (b *Binding) agent(name string) *agentLog { return (*b.roster.Load())[name] }

// lineup is the current roster; callers must not modify it.
func (b *Binding) lineup() map[string]*agentLog { return *b.roster.Load() }

// AddAgent adds an agent to the roster, unbound: Bind it once this
// replica holds its lease. It fails for an agent with subscribe: subjects
// or one already there.
func (b *Binding) AddAgent(a Agent) error {
	if len(a.Subscribe) > 0 {
		return fmt.Errorf("add agent %q: agents with subscribe: subjects are laid out at start only", a.Name)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	cur := b.lineup()
	if cur[a.Name] != nil {
		return fmt.Errorf("add agent %q: already there", a.Name)
	}
	al := newAgentLog(a, b.opts.Subjects)
	if b.js != nil {
		// What waits for it in the log (it was here before) is at or
		// below the router's position: the reader reads it from the
		// stream from the agent's cursors.
		at := b.routed.Load()
		for _, in := range al.inputs {
			b.win.lack(in, at)
			raise(&in.hint, at)
		}
	}
	next := maps.Clone(cur)
	next[a.Name] = al
	b.roster.Store(&next)
	return nil
}

// RemoveAgent unbinds the agent and takes it off the roster. It fails for
// an agent with subscribe: subjects; an unknown agent is ignored.
func (b *Binding) RemoveAgent(name string) error {
	a := b.agent(name)
	if a == nil {
		return nil
	}
	if len(a.subscribe) > 0 {
		return fmt.Errorf("remove agent %q: agents with subscribe: subjects are laid out at start only", name)
	}
	b.Unbind(name)
	b.mu.Lock()
	defer b.mu.Unlock()
	next := maps.Clone(b.lineup())
	delete(next, name)
	b.roster.Store(&next)
	return nil
}

// Retarget hands the agent's input to t (a new loop for it after a
// reload changed its spec), and notifies t when the agent is served here
// so that news routed to the previous target is read.
func (b *Binding) Retarget(name string, t Target) {
	a := b.agent(name)
	if a == nil {
		return
	}
	a.target.Store(targetRef{t})
	if a.owned.Load() || b.js == nil {
		t.Notify()
	}
}
