package guard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agent-worker/agent-worker/store"
)

// writable reports why the agent's ledger must not be written now (nil:
// it may be): this replica does not own the agent, or owns it but has not
// loaded its stored ledger. A ledger found not owned is marked not loaded,
// so it is written again only after Restore re-reads the store. Callers
// hold l.mu.
func (g *Guard) writable(l *ledger) error {
	_, err := g.writer(l)
	return err
}

// writer returns where the agent's ledger is written: the store under the
// fence of the agent's lease (Owner.Fence; plainly without an Owner), or
// why it must not be written now (see writable). Callers hold l.mu.
func (g *Guard) writer(l *ledger) (store.Writer, error) {
	f := store.Fence{}
	if g.o.Owner != nil {
		var ok bool
		if f, ok = g.o.Owner.Fence(l.name); !ok || !g.o.Owner.Owns(l.name) {
			l.restored = false
			return nil, fmt.Errorf("agent %q: %w", l.name, ErrNotOwner)
		}
	}
	if !l.restored {
		return nil, fmt.Errorf("agent %q: %w", l.name, ErrNotLoaded)
	}
	return store.Under(g.o.Store, f), nil
}

// markLocked records that the agent's ledger changed and must be stored.
// Callers hold l.mu.
func (g *Guard) markLocked(l *ledger) { l.ver++ }

// markWorkerLocked records that the worker-wide ledger changed through
// l and must be stored with l's next write. Callers hold l.mu and wmu.
func (g *Guard) markWorkerLocked(l *ledger) {
	g.wver++
	l.wneed = g.wver
}

// writeTimeout bounds one store write of a ledger.
const writeTimeout = 10 * time.Second

// flushNow stores the agent's ledger as it is now (and the worker-wide
// one), waiting for it: a trip, a reset or a charge made outside a turn
// is durable when its call returns. A failed write is logged and retried
// in the background.
func (g *Guard) flushNow(l *ledger) {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	_ = g.flush(ctx, l)
}

// flush writes the agent's ledger until the store holds at least the
// version it had when flush was called, then the worker-wide ledger up to
// the version the agent's changes need. Writes are coalesced: each
// writes the latest state, at most one is in flight per ledger, and a
// caller finding one in flight waits for it and writes again only if the
// state changed since it started. Nothing is written, and the change is
// dropped, when the ledger is not writable here (see writable): only the
// owner, once it has loaded the stored ledger, ever writes it, so a
// standby's stale or empty ledger never overwrites the owner's spend.
//
// A store error is counted, logged and returned, and the write retried in
// the background until it succeeds (or Shutdown): the ledger in memory
// stays the truth meanwhile. No lock is held across the store call.
func (g *Guard) flush(ctx context.Context, l *ledger) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, writeTimeout)
		defer cancel()
	}
	l.mu.Lock()
	target := l.ver
	werr := g.flushWorkerAlong(ctx, l, target)
	for l.saved < target {
		if l.writing {
			ch := l.done
			l.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return ctx.Err()
			}
			l.mu.Lock()
			continue
		}
		w, err := g.writer(l)
		if err != nil {
			l.saved, l.failing = l.ver, false // nothing of it is ever written
			l.dropped = true
			l.mu.Unlock()
			g.o.Log.Warn("guardrail state not written", "agent", l.name, "reason", err)
			if werr != nil {
				<-werr
			}
			return err
		}
		l.writing, l.done = true, make(chan struct{})
		v := l.ver
		data, _ := json.Marshal(l.st)
		l.mu.Unlock()
		_, err = w.Put(ctx, agentKey(l.name), data)
		l.mu.Lock()
		l.writing = false
		close(l.done)
		if errors.Is(err, store.ErrFenced) {
			// The lease moved while this replica thought it held it (it
			// was frozen): the next owner's ledger stands.
			l.saved, l.failing, l.restored = l.ver, false, false
			l.mu.Unlock()
			g.o.Log.Warn("guardrail state not written: the agent's lease moved", "agent", l.name)
			if werr != nil {
				<-werr
			}
			return fmt.Errorf("agent %q: %w (%w)", l.name, ErrNotOwner, err)
		}
		if err != nil {
			l.mu.Unlock()
			if werr != nil {
				<-werr
			}
			g.failed(l, "could not store the agent's spend; retrying (the ledger in memory still binds)", err)
			return err
		}
		l.saved = max(l.saved, v)
	}
	need := l.wneed
	l.mu.Unlock()
	if werr != nil {
		if err := <-werr; err != nil {
			g.failed(l, "could not store worker-wide spend; retrying (the ledger in memory still binds)", err)
			return err
		}
	}
	if err := g.flushWorker(ctx, need); err != nil {
		g.failed(l, "could not store worker-wide spend; retrying (the ledger in memory still binds)", err)
		return err
	}
	l.mu.Lock()
	if l.failing && l.saved >= l.ver {
		l.failing = false
		l.backoff = 0
		l.mu.Unlock()
		g.o.Log.Info("guardrail state stored after a failed write", "agent", l.name)
		return nil
	}
	l.mu.Unlock()
	return nil
}

// flushWorkerAlong starts the worker-wide ledger's write (up to the
// version the agent's changes need) alongside the agent's, when the
// agent's ledger needs a write up to target and may be written here. It
// returns the channel the worker write's error comes on; nil if it
// started none. Callers hold l.mu.
func (g *Guard) flushWorkerAlong(ctx context.Context, l *ledger, target uint64) (werr chan error) {
	if l.saved < target && l.wneed > 0 && g.writable(l) == nil {
		// Both ledgers need a write: the worker's goes at the same time,
		// so the caller waits for one round trip, not two.
		g.wmu.Lock()
		if g.wsaved < l.wneed {
			need := l.wneed
			werr = make(chan error, 1)
			go func() { werr <- g.flushWorker(ctx, need) }()
		}
		g.wmu.Unlock()
	}
	return werr
}

// flushWorker writes the worker-wide ledger until the stored version is
// at least need, coalescing like flush: agents ending their turns together
// share one write.
func (g *Guard) flushWorker(ctx context.Context, need uint64) error {
	g.wmu.Lock()
	for g.wsaved < need {
		if g.wwriting {
			ch := g.wdone
			g.wmu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return ctx.Err()
			}
			g.wmu.Lock()
			continue
		}
		g.wwriting, g.wdone = true, make(chan struct{})
		v := g.wver
		data, _ := json.Marshal(g.worker)
		g.wmu.Unlock()
		_, err := g.o.Store.Put(ctx, workerKey, data)
		g.wmu.Lock()
		g.wwriting = false
		close(g.wdone)
		if err != nil {
			g.wmu.Unlock()
			return err
		}
		g.wsaved = max(g.wsaved, v)
	}
	g.wmu.Unlock()
	return nil
}

// Retry delays of a failed ledger write.
const (
	retryMin = 250 * time.Millisecond
	retryMax = 30 * time.Second
)

// failed counts and logs a failed write and schedules its retry.
func (g *Guard) failed(l *ledger, msg string, err error) {
	g.failures.Add(1)
	g.o.Log.Error(msg, "agent", l.name, "error", err)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failing = true
	if l.retrying || g.closed.Load() {
		return
	}
	l.retrying = true
	l.backoff = min(max(2*l.backoff, retryMin), retryMax)
	g.o.Clock.AfterFunc(l.backoff, func() {
		l.mu.Lock()
		l.retrying = false
		l.mu.Unlock()
		if !g.closed.Load() {
			g.flushNow(l) // schedules the next retry if it fails again
		}
	})
}

// WriteFailures is how many ledger writes have failed (each is retried
// until it succeeds).
func (g *Guard) WriteFailures() uint64 { return g.failures.Load() }

// Unstored returns the agents whose ledger holds changes not yet stored
// (a write failed and is being retried, or a turn is running).
func (g *Guard) Unstored() []string {
	var out []string
	for _, l := range g.ledgers() {
		l.mu.Lock()
		if l.saved < l.ver {
			out = append(out, l.name)
		}
		l.mu.Unlock()
	}
	return out
}

// FlushAgent implements hook.ChargeFlusher: it writes the agent's ledger
// (and the worker-wide one its changes need) now, returning once the store
// holds every charge made so far. The driver calls it before it journals a
// model response, so a response replayed after a crash was charged exactly
// once. A ledger this replica may not write (not the owner, not loaded) is
// no error.
func (g *Guard) FlushAgent(ctx context.Context, agent string) error {
	l := g.ledger(agent)
	if l == nil {
		return nil
	}
	if err := g.flush(ctx, l); err != nil && !errors.Is(err, ErrNotOwner) && !errors.Is(err, ErrNotLoaded) {
		return err
	}
	return nil
}

// Flush stores every ledger this replica may write (see writable) with
// its latest state, and the worker-wide ledger; it returns the store's
// errors (a ledger it may not write is not one).
func (g *Guard) Flush(ctx context.Context) error {
	var errs []error
	for _, l := range g.ledgers() {
		l.mu.Lock()
		g.wmu.Lock()
		dirty := l.saved < l.ver || l.failing || g.wsaved < l.wneed
		g.wmu.Unlock()
		l.mu.Unlock()
		if !dirty {
			continue
		}
		if err := g.flush(ctx, l); err != nil && !errors.Is(err, ErrNotOwner) && !errors.Is(err, ErrNotLoaded) {
			errs = append(errs, fmt.Errorf("agent %s: %w", l.name, err))
		}
	}
	return errors.Join(errs...)
}

// Shutdown stores everything not stored yet, retrying a failing store
// until it succeeds or ctx ends, and stops the background retries. Call
// it after the driver and the subagents have stopped, while this replica
// still holds its leases.
func (g *Guard) Shutdown(ctx context.Context) error {
	delay := retryMin
	for {
		err := g.Flush(ctx)
		if err == nil || ctx.Err() != nil {
			g.closed.Store(true)
			if err != nil {
				g.o.Log.Error("guardrail state not all stored before shutdown", "error", err, "agents", g.Unstored())
			}
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(2*delay, retryMax)
	}
}
