package driver

import (
	"context"
	"errors"
	"maps"
	"time"

	"google.golang.org/adk/agent"
	"google.golang.org/adk/model"
	"google.golang.org/adk/plugin"
	"google.golang.org/adk/tool"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/store"
)

// needsRestore reports whether the agent is owned here but its state has
// not been loaded since it was acquired.
func (a *Agent) needsRestore() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return !a.gate.standby && !a.gate.restored && !a.gate.stopping
}

// Restored reports whether the agent's durable state is loaded since
// this replica last acquired it (or kept, for a lease that never left):
// until then no turn runs and its input is not read.
func (a *Agent) Restored() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.gate.restored
}

// Standby reports whether another replica holds (or this one no longer
// holds) the agent's lease, so no turn runs here.
func (a *Agent) Standby() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.gate.standby
}

// ErrLeaseLost ends a turn whose agent this replica no longer holds the
// lease of: another replica took it over, or this one could not renew it
// in time (the store was out of reach, or the process was frozen or
// starved) and let go so that another can, or the store refused the
// turn's record because the lease moved while the turn ran. The turn is
// abandoned: nothing of it is recorded and its messages are the log's to
// give again.
var ErrLeaseLost = errors.New("lease lost: this replica no longer owns the agent")

// SetOwned says whether this replica holds the agent's lease. Gaining it
// reloads the agent's durable state (its cursors among it) before its
// next turn (Acquired says when that may be skipped); losing it cancels
// the running turn and stops turns here — after a Release there is none
// to cancel — and forgets the messages read from the log: the next owner
// reads them from the cursors. Either way it ends a Release's closed
// gate.
func (a *Agent) SetOwned(owned bool) { a.setOwned(owned, true) }

// Acquired says this replica took the agent's lease. moved (lease.Gain):
// the lease changed hands since this replica last held it, so the agent's
// state is read from the store before its next turn, as SetOwned(true)
// does. Not moved — taken back after a lapse of this replica's renewals
// that nobody used — the agent runs on from what this process holds, with
// no restore: nothing but this replica wrote its state meanwhile. Its
// input is read again from its stored cursors (the messages read from the
// log were let go with the lease), and each guard keeps its state
// (hook.Keeper) or, without that, restores it.
func (a *Agent) Acquired(moved bool) { a.setOwned(true, moved) }

func (a *Agent) setOwned(owned, moved bool) {
	a.mu.Lock()
	was := !a.gate.standby
	a.gate.releasing = false // a handover ended (false) or was called off (true)
	a.gate.standby = !owned
	kept := owned && !was && !moved && a.gate.restored && a.lg.keep != nil
	if owned && !was && !kept {
		a.gate.restored = false
	}
	if owned != was {
		prev := a.lg
		a.lg = logState{gen: prev.gen + 1}
		switch {
		case !owned && a.gate.restored && !a.running && !prev.storing:
			// What this process holds is the store's truth once it was
			// restored and while nothing of the agent is being written:
			// kept for a take-back that nobody moved. (A write under way
			// may still land; a restore under way may finish after the
			// cursors were taken here.)
			a.lg.keep = maps.Clone(prev.cursors)
			if a.lg.keep == nil {
				a.lg.keep = inbox.Cursors{}
			}
		case kept:
			// Read again from the stored cursors: what was read beyond
			// them was let go with the lease.
			a.lg.cursors, a.lg.read, a.lg.since = prev.keep, maps.Clone(prev.keep), a.clock.Now()
		}
	}
	if !owned && a.cancelTurn != nil {
		a.cancelTurn(ErrLeaseLost)
	}
	a.mu.Unlock()
	if kept {
		a.keepState()
	}
	if !owned && was {
		a.letGo(a.inbox.Drain().Messages)
	}
	if owned != was {
		if kept {
			a.log.Debug("agent ownership changed", "owned", owned, "kept", true)
		} else {
			a.log.Info("agent ownership changed", "owned", owned)
		}
		a.emit(events.Ownership, map[string]any{"owned": owned})
	}
	a.poke()
}

// keepState goes on from what this process holds of the agent after a
// lapse nobody used: each guard keeps its state (hook.Keeper) or restores
// it from the store, and the scheduler reads the stored timer again if
// the one it held fired while this replica stood by (and was left to the
// owner, which there was none).
func (a *Agent) keepState() {
	if _, _, ok := a.sched.NextTimer(a.spec.Name); !ok {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := a.sched.Reload(ctx, a.spec.Name); err != nil {
			a.log.Warn("stored timer not read again after the lease was taken back; the heartbeat or the next message wakes the agent", "error", err)
		}
		cancel()
	}
	for _, g := range a.guards {
		if k, ok := g.(hook.Keeper); ok {
			k.Keep(a.spec.Name)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := g.Restore(ctx, a.spec.Name); err != nil {
			a.log.Error("guard state not restored after the lease was taken back; it is read at the next change of owner", "error", err)
		}
		cancel()
	}
}

// leasePlugin stops a turn whose lease moved before any more of its model
// or tool calls: checked before each, on this process's clock (the lease
// manager's Fence turns false the moment a renewal is overdue, so a
// process woken from a freeze stops at its next call, before its renewal
// has run). It runs first: a refused call is neither charged nor held for
// approval nor journaled.
func (a *Agent) leasePlugin() *plugin.Plugin {
	p, _ := plugin.New(plugin.Config{
		Name: "lease",
		BeforeModelCallback: func(agent.CallbackContext, *model.LLMRequest) (*model.LLMResponse, error) {
			return nil, a.leaseHolds()
		},
		BeforeToolCallback: func(tool.Context, tool.Tool, map[string]any) (map[string]any, error) {
			return nil, a.leaseHolds()
		},
	})
	return p
}

// leaseHolds returns nil while the running turn's lease is still this
// replica's, as it was when the turn began; else it cancels the turn
// (ErrLeaseLost) and returns the error.
func (a *Agent) leaseHolds() error {
	a.mu.Lock()
	cur := a.current
	a.mu.Unlock()
	if cur == nil || a.holds(cur.fence) {
		return nil
	}
	a.cancelRunning(ErrLeaseLost)
	return ErrLeaseLost
}

// holds reports whether f is still the fence of the agent's lease here.
func (a *Agent) holds(f turnFence) bool {
	cur, ok := a.fence()
	return ok && f.ok && cur == f.f
}

// turnFence is the fence a turn began under; ok false: it began without
// one (the lease was in doubt), and nothing of it may be written.
type turnFence struct {
	f  store.Fence
	ok bool
}

// writer returns the turn's writes under its fence; ok false when the
// lease moved since it began.
func (f turnFence) writer(a *Agent) (store.Writer, bool) {
	if !a.holds(f) {
		return nil, false
	}
	return store.Under(a.store, f.f), true
}

// Release prepares a handover of the agent to another replica without
// aborting anything: it closes the gate, so no new turn starts here (Gate
// says "standby", so the scheduler leaves timers and ticks to the next
// owner), and waits until no turn runs. The running turn, if any, is
// never cancelled by it: it finishes, is recorded and its messages are
// settled as usual. It returns nil once nothing runs; the gate then stays
// closed until SetOwned — false when the handover completes (nothing is
// cancelled, since nothing runs), true when it is called off. If ctx ends
// first, the gate opens again and ctx's error is returned.
//
// Not guaranteed: causes that wait while the gate is closed (a wake, a
// failed turn's retry) stay with this replica; messages do not (they
// stay in the log, and the next owner reads them from the cursors).
func (a *Agent) Release(ctx context.Context) error {
	a.mu.Lock()
	a.gate.releasing = true
	a.mu.Unlock()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		a.mu.Lock()
		running := a.running
		a.mu.Unlock()
		if !running {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			a.mu.Lock()
			a.gate.releasing = false
			a.mu.Unlock()
			a.poke()
			return ctx.Err()
		}
	}
}

// SetOwner records which replica holds the agent's lease (its holder
// name; "" none known), for Status.
func (a *Agent) SetOwner(holder string) {
	a.mu.Lock()
	a.owner = holder
	a.mu.Unlock()
}

// letGo gives up messages when this replica no longer owns the agent: the
// new owner reads the log's messages from the cursors, so keeping them
// here would run them twice; messages that exist only here are lost, and
// say so.
func (a *Agent) letGo(msgs []inbox.Message) {
	for _, m := range msgs {
		if !m.Pos.InLog() {
			a.onDrop(m, "this replica no longer owns the agent")
		}
	}
}
