package natsinbox

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/agent-worker/agent-worker/natsbus/subject"
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
//     stream's last sequence), new ones are routed to it. Its subscribe:
//     subjects start where Prepare placed them (rebind.go).
//   - RemoveAgent: the agent is no longer served; what waits for it stays
//     in the log, and its cursors stay in the store. Input that arrives
//     for it afterwards is input for an unknown agent: dead-lettered with
//     that reason, as after a restart without it. Its subscribe: subjects
//     no longer hold back the purges of the agents that still bind them.
//   - Rebind (rebind.go) gives an agent new subscribe: subjects.

// roster is one version of the configured agents' inputs: every agent by
// name, the subscribe: patterns, and for each subscribe: input the other
// agents' inputs whose subjects can meet it (the input is purged only
// below their cursors too). A roster is never changed once stored.
type roster struct {
	agents   map[string]*agentLog
	patterns []*pattern
	overlaps map[*input][]*input
}

// newRoster indexes agents' subscribe: inputs by pattern and links those
// that overlap.
func newRoster(agents map[string]*agentLog) *roster {
	r := &roster{agents: agents, overlaps: map[*input][]*input{}}
	byPattern := map[string]*pattern{}
	var bound []*input
	for _, name := range slices.Sorted(maps.Keys(agents)) {
		for _, in := range agents[name].inputs[2:] {
			p := byPattern[in.key]
			if p == nil {
				p = &pattern{subject: in.key}
				byPattern[in.key] = p
				r.patterns = append(r.patterns, p)
			}
			p.inputs = append(p.inputs, in)
			bound = append(bound, in)
		}
	}
	// The agents' own subjects are under the prefix, which subscribe:
	// subjects may not be (config), so only subscribe: inputs overlap.
	for _, in := range bound {
		for _, o := range bound {
			if o.agent != in.agent && subject.Overlap(in.key, o.key) {
				r.overlaps[in] = append(r.overlaps[in], o)
			}
		}
	}
	return r
}

// with is r with agent a in place of the agent of its name (a nil a with
// name removes it).
func (r *roster) with(name string, a *agentLog) *roster {
	next := maps.Clone(r.agents)
	if a == nil {
		delete(next, name)
	} else {
		next[name] = a
	}
	return newRoster(next)
}

// targetRef boxes a Target for atomic.Value (which wants one concrete
// type).
type targetRef struct{ Target }

// to is the agent's current target.
func (a *agentLog) to() Target { return a.target.Load().(targetRef).Target }

// agent returns the named agent's inputs, or nil.
func (b *Binding) agent(name string) *agentLog { return b.roster.Load().agents[name] }

// lineup is the current roster's agents; callers must not modify it.
func (b *Binding) lineup() map[string]*agentLog { return b.roster.Load().agents }

// AddAgent adds an agent to the roster, unbound: Bind it once this
// replica holds its lease. An agent with subscribe: subjects is added
// after Prepare placed them (rebind.go). It fails for an agent already
// there.
func (b *Binding) AddAgent(ctx context.Context, a Agent) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.agent(a.Name) != nil {
		return fmt.Errorf("add agent %q: already there", a.Name)
	}
	al := newAgentLog(a, b.opts.Subjects)
	b.startAt(al)
	b.roster.Store(b.roster.Load().with(a.Name, al))
	return b.arrived(ctx, al)
}

// RemoveAgent unbinds the agent and takes it off the roster; an unknown
// agent is ignored. The purges of subjects it shared are no longer held
// back by it.
func (b *Binding) RemoveAgent(name string) error {
	if b.agent(name) == nil {
		return nil
	}
	b.Unbind(name)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.roster.Store(b.roster.Load().with(name, nil))
	b.repurge()
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
