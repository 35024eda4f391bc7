package guard

// call is a call into an agent decided under a ledger's lock. Halts and
// reopenings carry a ticket, drawn under wmu where they are decided, and
// run in ticket order across all agents (see release): a reset's
// reopening never overtakes the halt of the trip it lifted, whichever
// agent tripped the worker-wide ceiling. Ticket 0: no order (a note).
type call struct {
	ticket uint64
	f      func()
}

// unlock releases l.mu and makes the calls decided under it, in order.
func (g *Guard) unlock(l *ledger) { g.release(l)() }

// release releases l.mu and returns the function that makes the calls
// decided under it, each with a ticket after those with earlier tickets.
// The caller must call it (once), holding no lock of the guard's.
func (g *Guard) release(l *ledger) func() {
	calls := l.after
	l.after = nil
	l.mu.Unlock()
	if len(calls) == 0 {
		return func() {}
	}
	return func() {
		for _, c := range calls {
			if c.ticket == 0 {
				c.f()
				continue
			}
			g.cmu.Lock()
			for g.served+1 != c.ticket {
				g.ccond.Wait()
			}
			g.cmu.Unlock()
			c.f()
			g.cmu.Lock()
			g.served = c.ticket
			g.ccond.Broadcast()
			g.cmu.Unlock()
		}
	}
}

// orderedLocked adds f to l's calls with the next ticket. Callers hold
// l.mu and wmu.
func (g *Guard) orderedLocked(l *ledger, f func()) {
	g.tickets++
	l.after = append(l.after, call{ticket: g.tickets, f: f})
}
