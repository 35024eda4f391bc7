package guard

// Charge implements hook.Charger: it adds usd to the agent's spend from
// outside a model call (a subagent's spend counts against its parent) and
// trips a crossed ceiling. The charge is stored when Charge returns (or,
// the store failing, retried until it is): a caller may ack the charge's
// record.
func (g *Guard) Charge(agent string, usd float64) {
	l := g.ledger(agent)
	if l == nil {
		return
	}
	l.mu.Lock()
	g.chargeLocked(l, usd, l.inTurn)
	calls := g.release(l)
	g.flushNow(l)
	calls()
}

// chargeLocked adds usd to the agent's and the worker's spend — and to
// the running turn's when inTurn (the charge is the turn's: a model call
// of it, a subagent's spend while it runs) — and trips the first ceiling
// crossed, the turn's only when inTurn (unless a trip already holds the
// agent). Callers hold l.mu. It returns the trip.
func (g *Guard) chargeLocked(l *ledger, usd float64, inTurn bool) *Trip {
	if changed, _ := g.rollDay(l); changed {
		g.markLocked(l)
	}
	if usd == 0 {
		// Nothing spent (an unpriced model): nothing to store, no store
		// round trip at the end of the turn.
		return nil
	}
	l.st.SessionSpent += usd
	l.st.DaySpent += usd
	if inTurn && l.inTurn {
		l.turnSpent += usd
	}
	g.markLocked(l)
	g.wmu.Lock()
	defer g.wmu.Unlock()
	g.worker.Spent += usd
	g.markWorkerLocked(l)
	if t := g.crossed(l, inTurn); t != nil && l.st.Trip == nil && g.worker.Trip == nil {
		g.tripLocked(l, t)
		return t
	}
	return nil
}
