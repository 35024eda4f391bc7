package guard

import (
	"time"
)

func (g *Guard) today() string { return g.o.Clock.Now().In(g.o.Location).Format(time.DateOnly) }

// rollDay starts a new day's ledger when the calendar day changed; a
// daily trip of the old day is lifted. Callers hold l.mu (l may be nil)
// and not wmu. It reports whether the agent's or the worker's ledger
// changed, and whether a daily trip was lifted. A changed worker ledger
// is marked to be stored with l's next write.
func (g *Guard) rollDay(l *ledger) (changed, lifted bool) {
	today := g.today()
	g.wmu.Lock()
	if g.worker.Day != today {
		if g.worker.Trip != nil {
			lifted = true
		}
		g.worker = workerState{Day: today, Added: 0}
		g.wver++
		changed = true
		if l != nil {
			l.wneed = g.wver
		}
	}
	g.wmu.Unlock()
	if l != nil && l.st.Day != today {
		l.st.Day, l.st.DaySpent, l.st.DayAdded = today, 0, 0
		changed = true
		if l.st.Trip != nil && l.st.Trip.Guardrail == Daily {
			l.st.Trip = nil
			lifted = true
		}
	}
	return changed, lifted
}

// armDayBoundary wakes the guard at the next midnight in its time zone to
// lift daily trips.
func (g *Guard) armDayBoundary() {
	g.dmu.Lock()
	defer g.dmu.Unlock()
	if g.day != nil {
		return
	}
	now := g.o.Clock.Now().In(g.o.Location)
	y, m, d := now.Date()
	midnight := time.Date(y, m, d+1, 0, 0, 0, 0, g.o.Location)
	g.day = g.o.Clock.AfterFunc(midnight.Sub(now), g.newDay)
}

// newDay lifts daily trips, stores the new day's ledgers of the agents
// this replica owns, and reopens the agents the trips halted.
func (g *Guard) newDay() {
	g.dmu.Lock()
	g.day = nil
	g.dmu.Unlock()
	g.wmu.Lock()
	workerTripped := g.worker.Trip != nil
	g.wmu.Unlock()
	var reopen, owned []*ledger
	for _, l := range g.ledgers() {
		l.mu.Lock()
		wasDaily := l.st.Trip != nil && l.st.Trip.Guardrail == Daily
		changed, _ := g.rollDay(l)
		if (wasDaily || workerTripped) && l.st.Trip == nil {
			reopen = append(reopen, l)
		}
		if g.o.Owner == nil || g.o.Owner.Owns(l.name) {
			// Another replica's agent is its owner's to roll.
			if changed {
				g.markLocked(l)
			}
			owned = append(owned, l)
		}
		l.mu.Unlock()
	}
	for _, l := range owned {
		g.flushNow(l)
	}
	for _, l := range reopen {
		g.o.Log.Info("new day: daily guardrail lifted", "agent", l.name)
		g.emit(l.name, EventReset, map[string]any{"guardrail": Daily, "reason": "new day"})
		if ctl := g.ctl(l.name); ctl != nil {
			ctl.ClearHalt()
		}
	}
}
