package guard

import (
	"context"
	"fmt"
)

// Restore implements hook.Guard: it loads the agent's spend and trip
// (and, once, the worker's) and re-halts a tripped agent. What this
// replica held of the agent and had not stored is dropped: the store is
// the truth for a replica that (re)gains the agent. A stored amount
// beyond float64's range (1e999) does not fail the load: it is repaired,
// logged and stored again (loadLedger), so no ceiling or view is ever
// infinite.
func (g *Guard) Restore(ctx context.Context, agent string) error {
	l := g.ledger(agent)
	if l == nil {
		return nil
	}
	l.mu.Lock()
	// No write of the old ledger lands after the load: none starts from
	// here (not loaded), and one in flight is waited for.
	l.restored = false
	for l.writing {
		ch := l.done
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("restore guardrails of %s: %w", agent, ctx.Err())
		}
		l.mu.Lock()
	}
	l.mu.Unlock()
	g.wmu.Lock()
	needWorker := !g.wload
	g.wmu.Unlock()
	// A stored amount out of float64's range is repaired here (repair.go)
	// and the mended ledger stored with the next write.
	var st state
	_, mended, err := g.loadLedger(ctx, agent, agentKey(agent), &st)
	if err != nil {
		return fmt.Errorf("restore guardrails of %s: %w", agent, err)
	}
	var ws workerState
	var wmended bool
	if needWorker {
		if _, wmended, err = g.loadLedger(ctx, agent, workerKey, &ws); err != nil {
			return fmt.Errorf("restore worker-wide guardrail: %w", err)
		}
	}
	l.mu.Lock()
	g.wmu.Lock()
	if needWorker && !g.wload {
		g.worker, g.wload = ws, true
		if wmended {
			g.markWorkerLocked(l)
		}
	}
	g.wmu.Unlock()
	l.st, l.restored, l.dropped = st, true, false
	l.saved, l.failing = l.ver, false
	if changed, _ := g.rollDay(l); changed || mended || wmended {
		g.markLocked(l)
	}
	trip := l.st.Trip
	g.wmu.Lock()
	if trip == nil && g.worker.Trip != nil {
		trip = g.worker.Trip
	}
	g.wmu.Unlock()
	l.mu.Unlock()
	if ctl := g.ctl(agent); trip != nil && ctl != nil {
		g.o.Log.Warn("agent restored halted by a guardrail", "agent", agent, "guardrail", trip.Guardrail, "reason", trip.Reason)
		ctl.Halt(trip.Reason)
		g.armDayBoundary()
	}
	return nil
}

// Keep makes the agent's ledger in memory its truth again after a let-go
// nobody used (hook.Keeper): it is marked loaded, as Restore would, and,
// if this replica could not write a change while it stood by (a charge
// of a call that ended meanwhile), stored at once under the new fence.
func (g *Guard) Keep(agent string) {
	l := g.ledger(agent)
	if l == nil {
		return
	}
	l.mu.Lock()
	l.restored = true
	write := l.dropped
	l.dropped = false
	if write {
		g.markLocked(l)
	}
	l.mu.Unlock()
	if write {
		g.flushNow(l)
	}
}
