package driver

import (
	"context"
	"fmt"
	"slices"

	"github.com/agent-worker/agent-worker/inbox"
)

// A config reload changes the agent set while the loops run: Add starts
// an agent, Remove stops one for good, Replace gives one a new Spec. An
// Agent's Spec never changes in place (every part of a turn reads it
// without a lock); a new Spec is a new Agent under the same name, which
// takes over from the old one between two turns the way a new owner takes
// over after a lease handover — its durable state (cursors, pause, turn
// count, history, memory, timers, trips) is restored from the store —
// and, unlike a handover, the old one's pending wakes and the messages
// only memory held are handed to it.
//
// Guarantees:
//   - The running turn keeps its Spec: Replace and Remove close the gate
//     and wait for it to finish (never cancelling it); the next turn runs
//     with the new Spec.
//   - No message is lost or run twice by the swap: the messages of the
//     input log are read again by the new agent from the stored cursors
//     (the turn that finished stored them with its record), the ones
//     only memory held are handed over, and no two loops run turns for the
//     name at once.
//   - Remove keeps the agent's stored state: an agent added again under
//     the name resumes from it.
//
// Not guaranteed: a failed turn's retry backoff and a throttle pause are
// not carried over (the pending wake is: the new agent runs it as soon as
// its state is restored).

// Lane runs f with the agent's ownership held still: no SetOwned,
// SetOwner or Release for the agent runs while f does (the worker's lease
// manager runs f in the agent's callback lane: lease.Manager.Serial).
type Lane func(agent string, f func())

// startLoop runs a's loop under the loops' context; before Start and
// after Shutdown it does nothing (Start starts every registered agent).
// Callers hold d.mu.
func (d *Driver) startLoop(a *Agent) {
	if d.loops == nil {
		return
	}
	ctx := d.loops
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		a.loop(ctx)
	}()
}

// build makes an Agent of s, ready to register.
func (d *Driver) build(s Spec) (*Agent, error) {
	hist, bind := newHistory(d.deps.Store, s)
	a, err := newAgent(s, d.deps, hist)
	if err != nil {
		return nil, fmt.Errorf("driver: agent %q: %w", s.Name, err)
	}
	bind(a)
	a.records = d.records
	a.restoring = d.restoring
	return a, nil
}

// Add registers and starts an agent of s, in standby when the driver is
// leased (SetOwned(true) once its lease is held), and gives the scheduler
// its schedules. It fails on a name in use or a Spec the driver cannot
// run, changing nothing.
func (d *Driver) Add(s Spec) (*Agent, error) {
	if _, err := d.Agent(s.Name); err == nil {
		return nil, fmt.Errorf("driver: agent %q defined twice", s.Name)
	}
	a, err := d.build(s)
	if err != nil {
		return nil, err
	}
	if err := d.deps.Scheduler.Replace(s.Name, a, s.Schedules); err != nil {
		return nil, fmt.Errorf("driver: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.agents[s.Name] = a
	d.order = append(d.order, s.Name)
	d.startLoop(a)
	return a, nil
}

// Remove stops the named agent for good once its running turn has
// finished (never cancelling it): no new turn starts from the call on,
// its schedules and timer are disarmed, and its loop ends. Messages only
// memory held are dropped with a dead-letter record (with the input log
// there are none: the log keeps them). Stored state stays. If ctx ends
// before the turn finishes, nothing changes and ctx's error is returned.
func (d *Driver) Remove(ctx context.Context, name string, lane Lane) error {
	var gone *Agent
	err := d.swap(ctx, name, lane, func(old *Agent) error {
		d.deps.Scheduler.Remove(name)
		d.mu.Lock()
		delete(d.agents, name)
		d.order = slices.DeleteFunc(d.order, func(n string) bool { return n == name })
		d.mu.Unlock()
		gone = old
		return nil
	})
	if err != nil {
		return err
	}
	for _, m := range gone.retire() {
		gone.onDrop(m, "the agent was removed from the config")
	}
	return nil
}

// Handover are the worker's parts of a Replace, run in the agent's lane
// while no turn runs.
type Handover struct {
	// Lane holds the agent's ownership still (nil: none needed).
	Lane Lane
	// Before runs before the new Agent is built: the guards learn the
	// new limits there, so no turn is charged against a ledger being
	// replaced. Nil: nothing.
	Before func()
	// Swapped is called with the new Agent before its loop starts: the
	// worker points the input log at it. Nil: nothing.
	Swapped func(*Agent)
}

// Replace gives the named agent the Spec s from its next turn: a new
// Agent of s takes over once the running turn has finished, with the old
// one's ownership, pending wakes and memory-only messages. If ctx ends
// before the turn finishes, or s cannot be built, the old agent runs on
// and the error is returned.
func (d *Driver) Replace(ctx context.Context, s Spec, h Handover) error {
	return d.swap(ctx, s.Name, h.Lane, func(old *Agent) error {
		if h.Before != nil {
			h.Before()
		}
		a, err := d.build(s)
		if err != nil {
			return err
		}
		if err := d.deps.Scheduler.Replace(s.Name, a, s.Schedules); err != nil {
			return fmt.Errorf("driver: %w", err)
		}
		old.mu.Lock()
		owned, owner := !old.gate.standby, old.owner
		old.mu.Unlock()
		a.SetOwner(owner)
		if h.Swapped != nil {
			h.Swapped(a)
		}
		d.mu.Lock()
		d.agents[s.Name] = a
		d.startLoop(a)
		d.mu.Unlock()
		held := old.retire()
		a.takeOver(old, held)
		if owned {
			a.SetOwned(true) // restores its state from the store, then reads the log
		}
		return nil
	})
}

// swap closes the agent's gate, waits for its running turn, and runs
// change in the agent's lane while no turn runs; a turn that slipped in
// (an ownership change reopened the gate) is waited for again. A change
// that fails reopens the gate.
func (d *Driver) swap(ctx context.Context, name string, lane Lane, change func(old *Agent) error) error {
	if lane == nil {
		lane = func(_ string, f func()) { f() }
	}
	for {
		old, err := d.Agent(name)
		if err != nil {
			return err
		}
		if err := old.Release(ctx); err != nil {
			return fmt.Errorf("driver: agent %q: waiting for its running turn: %w", name, err)
		}
		done := false
		lane(name, func() {
			if cur, _ := d.Agent(name); cur != old {
				return // swapped meanwhile: look again
			}
			old.mu.Lock()
			if old.running {
				old.mu.Unlock()
				return
			}
			old.gate.releasing = true // closed again, under the lock the loop admits under
			old.mu.Unlock()
			done = true
			if err = change(old); err != nil {
				old.mu.Lock()
				old.gate.releasing = false
				old.mu.Unlock()
				old.poke()
			}
		})
		if done {
			return err
		}
	}
}

// retire stops a replaced or removed agent's loop and returns the
// messages that only memory held (the input log's are read again from
// the cursors by whoever serves the agent next). Its approvals' expiry
// timers are disarmed: the approvals are stored and the next agent
// restores them.
func (a *Agent) retire() []inbox.Message {
	a.stop()
	a.mu.Lock()
	ids := make([]string, 0, len(a.expiries))
	for id := range a.expiries {
		ids = append(ids, id)
	}
	a.mu.Unlock()
	for _, id := range ids {
		a.disarmExpiry(id)
	}
	var held []inbox.Message
	for _, m := range a.inbox.Drain().Messages {
		if !m.Pos.InLog() {
			held = append(held, m)
		}
	}
	return held
}

// takeOver gives a the wakes and notes old had pending, and the messages
// only memory held.
func (a *Agent) takeOver(old *Agent, held []inbox.Message) {
	old.mu.Lock()
	causes, notes, first := old.causes, old.notes, old.firstWake
	old.causes, old.notes = nil, nil
	old.mu.Unlock()
	for _, m := range held {
		a.inbox.Push(m)
	}
	a.mu.Lock()
	if len(a.causes) == 0 {
		a.firstWake = first
	}
	a.causes = append(a.causes, causes...)
	a.notes = append(a.notes, notes...)
	a.mu.Unlock()
	a.log.Info("agent spec replaced; the next turn runs with it", "pending_wakes", len(causes), "handed_messages", len(held))
	a.poke()
}

// description is the ADK agent description of agent name, the same for
// its turns and its asks.
func description(name string) string { return "agent-worker agent " + name }
