package driver

import (
	"context"
	"errors"
	"time"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/inbox"
)

// needsRestore reports whether the agent is owned here but its state has
// not been loaded since it was acquired.
func (a *Agent) needsRestore() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return !a.gate.standby && !a.gate.restored && !a.gate.stopping
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
// in time (the store was out of reach) and let go so that another can.
var ErrLeaseLost = errors.New("lease lost: this replica no longer owns the agent")

// SetOwned says whether this replica holds the agent's lease. Gaining it
// reloads the agent's durable state (its cursors among it) before its
// next turn; losing it cancels the running turn and stops turns here —
// after a Release there is none to cancel — and forgets the messages read
// from the log: the next owner reads them from the cursors. Either way it
// ends a Release's closed gate.
func (a *Agent) SetOwned(owned bool) {
	a.mu.Lock()
	was := !a.gate.standby
	a.gate.releasing = false // a handover ended (false) or was called off (true)
	a.gate.standby = !owned
	if owned && !was {
		a.gate.restored = false
	}
	if owned != was {
		a.lg = logState{gen: a.lg.gen + 1}
	}
	if !owned && a.cancelTurn != nil {
		a.cancelTurn(ErrLeaseLost)
	}
	a.mu.Unlock()
	if !owned && was {
		a.letGo(a.inbox.Drain().Messages)
	}
	if owned != was {
		a.log.Info("agent ownership changed", "owned", owned)
		a.emit(events.Ownership, map[string]any{"owned": owned})
	}
	a.poke()
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
