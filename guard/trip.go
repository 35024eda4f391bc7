package guard

import (
	"context"
	"errors"
	"fmt"

	"github.com/agent-worker/agent-worker/money"
)

// ErrTripped is wrapped by Admit's error for a tripped agent.
var ErrTripped = errors.New("guardrail tripped")

// Admit implements hook.Guard: a tripped agent, or one already at a
// ceiling, gets no turn. It decides on the ledger in memory, which is
// always current; it writes (synchronously) only when it changes a trip.
func (g *Guard) Admit(_ context.Context, agent string) error {
	l := g.ledger(agent)
	if l == nil {
		return nil
	}
	l.mu.Lock()
	changed, lifted := g.rollDay(l)
	if changed {
		g.markLocked(l)
	}
	tripped, err := g.admitLocked(l)
	// The driver holds the agent's lock while it admits, and a halt
	// takes it: the calls (a halt, here) wait for Admit to return.
	hasCalls := len(l.after) > 0
	if run := g.release(l); hasCalls {
		go run()
	}
	if lifted || tripped {
		g.flushNow(l)
	}
	return err
}

// admitLocked: callers hold l.mu. tripped: a ceiling tripped here.
func (g *Guard) admitLocked(l *ledger) (tripped bool, err error) {
	if t := l.st.Trip; t != nil {
		return false, fmt.Errorf("%w: %s", ErrTripped, t.Reason)
	}
	g.wmu.Lock()
	defer g.wmu.Unlock()
	if t := g.worker.Trip; t != nil {
		return false, fmt.Errorf("%w: %s", ErrTripped, t.Reason)
	}
	if trip := g.crossed(l, false); trip != nil {
		g.tripLocked(l, trip)
		return true, fmt.Errorf("%w: %s", ErrTripped, trip.Reason)
	}
	return false, nil
}

// ceilings returns the effective session and daily ceilings (configured
// plus added budget; 0 = none).
func (l *ledger) ceilings() (session, daily float64) {
	if l.limits.SessionUSD > 0 {
		session = l.limits.SessionUSD + l.st.SessionAdded
	}
	if l.limits.DailyUSD > 0 {
		daily = l.limits.DailyUSD + l.st.DayAdded
	}
	return session, daily
}

// workerCeiling: callers hold wmu.
func (g *Guard) workerCeiling() float64 {
	if g.o.WorkerDailyUSD <= 0 {
		return 0
	}
	return g.o.WorkerDailyUSD + g.worker.Added
}

// crossed returns the first ceiling the agent has reached, if any; the
// turn ceiling only inside a turn. Callers hold l.mu and wmu.
func (g *Guard) crossed(l *ledger, inTurn bool) *Trip {
	session, daily := l.ceilings()
	switch {
	case inTurn && l.limits.TurnUSD > 0 && l.turnSpent >= l.limits.TurnUSD:
		return &Trip{Guardrail: Turn, At: g.o.Clock.Now(), Spent: l.turnSpent, Ceiling: l.limits.TurnUSD,
			Reason: fmt.Sprintf("turn cost %s reached the per-turn ceiling of %s", money.USD(l.turnSpent), money.USD(l.limits.TurnUSD))}
	case session > 0 && l.st.SessionSpent >= session:
		return &Trip{Guardrail: Session, At: g.o.Clock.Now(), Spent: l.st.SessionSpent, Ceiling: session,
			Reason: fmt.Sprintf("session spend %s reached the session ceiling of %s", money.USD(l.st.SessionSpent), money.USD(session))}
	case daily > 0 && l.st.DaySpent >= daily:
		return &Trip{Guardrail: Daily, At: g.o.Clock.Now(), Spent: l.st.DaySpent, Ceiling: daily,
			Reason: fmt.Sprintf("spend today (%s) %s reached the daily ceiling of %s", l.st.Day, money.USD(l.st.DaySpent), money.USD(daily))}
	case g.workerCeiling() > 0 && g.worker.Spent >= g.workerCeiling():
		return &Trip{Guardrail: WorkerDaily, At: g.o.Clock.Now(), Spent: g.worker.Spent, Ceiling: g.workerCeiling(),
			Reason: fmt.Sprintf("worker-wide spend today (%s) %s reached the worker daily ceiling of %s", g.worker.Day, money.USD(g.worker.Spent), money.USD(g.workerCeiling()))}
	}
	return nil
}

// tripLocked records a trip, halts the agent (every agent for the
// worker-wide ceiling) and announces it. Callers hold l.mu and wmu, so
// the worker-wide ceiling trips once however many agents cross it
// together; the halts run after l.mu is released, and the caller stores
// the trip (flushNow) before it lets the turn go on.
func (g *Guard) tripLocked(l *ledger, t *Trip) {
	var halt []string
	if t.Guardrail == WorkerDaily {
		g.worker.Trip = t
		g.markWorkerLocked(l)
		g.mu.RLock()
		for name := range g.agents {
			halt = append(halt, name)
		}
		g.mu.RUnlock()
	} else {
		l.st.Trip = t
		halt = []string{l.name}
	}
	g.markLocked(l)
	g.o.Log.Warn("guardrail tripped: agent halted", "agent", l.name, "guardrail", t.Guardrail, "spent_usd", t.Spent, "ceiling_usd", t.Ceiling, "reason", t.Reason)
	for _, x := range halt {
		g.emit(x, EventTripped, map[string]any{"guardrail": t.Guardrail, "reason": t.Reason, "spent_usd": t.Spent, "ceiling_usd": t.Ceiling})
	}
	for _, x := range halt {
		if ctl := g.ctl(x); ctl != nil {
			g.orderedLocked(l, func() { ctl.Halt(t.Reason) })
		}
	}
	if t.Guardrail == Daily || t.Guardrail == WorkerDaily {
		l.after = append(l.after, call{f: g.armDayBoundary})
	}
}

// Trip records a trip raised elsewhere (the watchdog) so it is stored and
// survives a restart, and halts the agent. The trip is stored when Trip
// returns (or, the store failing, retried until it is).
func (g *Guard) Trip(agent, guardrail, reason string) {
	l := g.ledger(agent)
	if l == nil {
		return
	}
	l.mu.Lock()
	g.wmu.Lock()
	g.tripLocked(l, &Trip{Guardrail: guardrail, Reason: reason, At: g.o.Clock.Now()})
	g.wmu.Unlock()
	calls := g.release(l)
	g.flushNow(l)
	calls()
}
