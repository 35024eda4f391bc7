package driver

import (
	"context"
	"fmt"
	"time"

	"github.com/agent-worker/agent-worker/events"
)

// gate is what keeps turns from starting; each field closes it by
// itself. It is the agent's, under a.mu.
type gate struct {
	paused   bool
	halt     string // non-empty: halted, with the reason
	stopping bool
	restored bool // persisted state loaded; the gate stays shut until then
	standby  bool // another replica owns this agent (lease); no turns here
	// releasing: Release closed the gate for a handover; SetOwned opens
	// it again.
	releasing bool
}

// gateRestoring is why the gate of an agent whose durable state is not
// loaded yet is closed.
const gateRestoring = "restoring"

// closed says why no turn may start ("" when none keeps it): the agent
// is "stopped" (stopping), on "standby" (another replica owns it, or a
// Release hands it over), "halted", "paused", or "restoring" its state.
// Callers hold a.mu.
func (g gate) closed() (why string) {
	switch {
	case g.stopping:
		return "stopped"
	case g.standby, g.releasing:
		return "standby"
	case g.halt != "":
		return "halted"
	case g.paused:
		return "paused"
	case !g.restored:
		return gateRestoring
	}
	return ""
}

// admit decides under the lock whether a turn starts now. On yes, it takes
// the waiting causes and marks the agent running with a cancel function in
// place, so Interrupt/Halt reach the turn from this instant.
func (a *Agent) admit(ctx context.Context) (turnStart, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.causes) == 0 || a.staleLocked() {
		a.causes = nil
		a.consecutive = 0
		return turnStart{}, false
	}
	if a.gate.closed() != "" {
		return turnStart{}, false
	}
	if _, ok := a.sched.Fence(a.spec.Name); !ok {
		// Owned, but the lease is in doubt here (a renewal overdue: the
		// process was frozen or starved): a turn started now would be
		// abandoned at its first call. The lease manager lets the agent go
		// or renews; either pokes the loop, and so does this timer.
		a.awaitFenceLocked()
		return turnStart{}, false
	}
	if a.health != nil {
		if err := a.health.Unavailable(); err != nil {
			a.waitLocked(err)
			return turnStart{}, false
		}
	}
	a.endWaitLocked()
	now := a.clock.Now()
	if now.Before(a.retryAt) || now.Before(a.throttledTo) {
		return turnStart{}, false // a timer pokes the loop when they pass
	}
	if a.spec.Coalesce > 0 && a.consecutive == 0 {
		if due := a.firstWake.Add(a.spec.Coalesce); now.Before(due) {
			if !a.coalescing {
				a.coalescing = true
				a.clock.AfterFunc(due.Sub(now), func() {
					a.mu.Lock()
					a.coalescing = false
					a.mu.Unlock()
					a.poke()
				})
			}
			return turnStart{}, false
		}
	}
	if a.jr != nil && !a.jr.admitLocked(now) {
		return turnStart{}, false // an unfinished turn's messages are coming back
	}
	if a.idleLocked() {
		a.skipLocked()
		return turnStart{}, false
	}
	if ok, next := a.turnsLimit.take(now); !ok {
		a.throttleLocked(now, next, "turns_per_hour",
			fmt.Sprintf("the worker allows you %d turns an hour, so this turn waited until %s", a.spec.TurnsPerHour, next.UTC().Format(time.RFC3339)), a.spec.TurnsPerHour)
		return turnStart{}, false
	}
	for _, g := range a.guards {
		if err := g.Admit(ctx, a.spec.Name); err != nil {
			a.gate.halt = err.Error()
			a.log.Warn("turn refused by guard; agent halted", "reason", err)
			a.emit(events.Halted, map[string]any{"reason": err.Error()})
			return turnStart{}, false
		}
	}
	turnCtx, cancel := context.WithCancelCause(ctx)
	t := turnStart{ctx: turnCtx, cancel: cancel, causes: a.causes, notes: a.notes, eager: a.eagerTimer}
	for _, c := range a.causes {
		if c.Source != SourceTimer {
			t.eager = false
		}
	}
	a.causes, a.notes = nil, nil
	a.running = true
	a.cancelTurn = cancel
	a.requested = nil
	a.retryAt, a.retryOutage = time.Time{}, false
	a.consecutive++
	if a.jr != nil {
		t.resume = a.jr.take()
	}
	if t.resume != nil && t.resume.Turn > a.turns {
		a.turns = t.resume.Turn // resumed after a restart: the same turn
	} else {
		a.turns++
	}
	t.n = a.turns
	return t, true
}

// staleLocked reports whether every waiting cause is an inbox message
// that is gone (settled as already handled, or given up): no turn is
// owed. Callers hold mu.
func (a *Agent) staleLocked() bool {
	for _, c := range a.causes {
		if !c.Source.message() {
			return false
		}
	}
	w, _ := a.inbox.Len()
	return w == 0
}

// Gate says why no turn may start: "paused", "halted", "stopped", or "".
func (a *Agent) Gate() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	// Standby covers releasing: the next owner serves the timers and
	// ticks (a tick's replace overlap must not cancel the turn being let
	// finish). A state not yet restored is no reason here.
	if why := a.gate.closed(); why != gateRestoring {
		return why
	}
	return ""
}

// waitLocked holds turns because a dependency is down: said once per
// outage (log, event), shown as state waiting, and checked again every few
// seconds in case the recovery notice is missed. Callers hold mu.
func (a *Agent) waitLocked(err error) {
	if a.waiting == "" {
		a.log.Warn("turn waits: a dependency is unavailable; no model call until it is back", "reason", err, "pending_wakes", len(a.causes))
		a.emit(events.Waiting, map[string]any{"reason": err.Error()})
	}
	a.waiting = err.Error()
	if !a.waitCheck {
		a.waitCheck = true
		a.clock.AfterFunc(waitRecheck, func() {
			a.mu.Lock()
			a.waitCheck = false
			a.mu.Unlock()
			a.poke()
		})
	}
}

// waitRecheck is how often a waiting agent looks at its dependencies
// again by itself (Driver.Recovered wakes it sooner).
const waitRecheck = 5 * time.Second

// endWaitLocked ends a wait for dependencies. Callers hold mu.
func (a *Agent) endWaitLocked() {
	if a.waiting == "" {
		return
	}
	a.log.Info("dependencies are back; turns run again", "was", a.waiting)
	a.emit(events.WaitingOver, map[string]any{"was": a.waiting})
	a.waiting = ""
}

// recovered ends the backoff of a retry that an outage caused, and looks
// at the gate again.
func (a *Agent) recovered() {
	a.mu.Lock()
	if a.retryOutage {
		a.retryAt, a.retryOutage = time.Time{}, false
	}
	a.mu.Unlock()
	a.poke()
}

// throttleLocked makes the next turn wait until next, says so in the log,
// an event and the next prompt, and pokes the loop then. turns is the
// limit that bit. Callers hold mu.
func (a *Agent) throttleLocked(now, next time.Time, reason, note string, turns int) {
	a.throttledTo, a.throttledBy = next, reason
	pause := next.Sub(now)
	a.log.Warn("turn throttled", "reason", reason, "turns", turns, "until", next, "pause", pause)
	a.emit(events.Throttled, map[string]any{"reason": reason, "turns": turns, "until": next, "pause_ms": pause.Milliseconds()})
	a.notes = append(a.notes, note)
	a.clock.AfterFunc(pause, a.poke)
}

// fenceRecheck is how soon an agent whose lease is in doubt looks again.
const fenceRecheck = time.Second

// awaitFenceLocked arms one look at the gate after fenceRecheck. Callers
// hold mu.
func (a *Agent) awaitFenceLocked() {
	if a.fenceCheck {
		return
	}
	a.fenceCheck = true
	a.clock.AfterFunc(fenceRecheck, func() {
		a.mu.Lock()
		a.fenceCheck = false
		a.mu.Unlock()
		a.poke()
	})
}
