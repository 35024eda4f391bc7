// Package lease gives each agent exactly one owner among the worker
// replicas that share a store: a replica runs an agent's turns, consumes
// its messages and fires its timers only while it holds the agent's lease.
// A lease is a store key holding the holder and an expiry, taken and
// renewed with compare-and-set, so the store's revision of the key is a
// fencing token: a deposed holder's renewal fails and it lets go at once.
// It must not decide what an owner does.
//
// A renewal that fails with a conflict is settled by reading the record:
// the lease is lost only if the record is gone, has expired or names
// another holder. A record that still names this replica is its own
// renewal that the store applied but whose reply was lost (a timeout or a
// reconnect); the replica adopts that record's revision as its fencing
// token and keeps the lease.
//
// Guarantees: at most one replica believes it holds a lease at a time,
// provided replicas' clocks differ by less than TTL - RenewEvery and each
// replica's Holder is unique; when a holder dies, another replica takes
// over within TTL + RenewEvery; a renewal whose reply is lost does not
// cost the holder its lease.
// Not guaranteed: a holder cut off from the store keeps running until a
// renewal round finds TTL - RenewEvery passed since its last confirmed
// renewal (one the store is known to have applied).
package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/store"
)

// Options configure a Manager.
type Options struct {
	Store store.Store // required
	Clock clock.Clock
	Log   *slog.Logger
	// Holder names this replica (host, pid, random); required, and unique
	// among the replicas: a record naming it is taken to be this
	// replica's own write.
	Holder string
	// TTL is how long a lease lasts without renewal. Default 15s.
	TTL time.Duration
	// RenewEvery is how often leases are renewed and free ones sought.
	// Default TTL/3.
	RenewEvery time.Duration
	// OnAcquire and OnLose are told when this replica gains or loses an
	// agent. They run on the manager's goroutine, in order, and must not
	// block for long.
	OnAcquire func(agent string)
	OnLose    func(agent string)
}

// record is a lease in the store, under lease.<agent>.
type record struct {
	Holder  string    `json:"holder"`
	Expires time.Time `json:"expires"`
}

// Manager holds this replica's leases.
type Manager struct {
	o      Options
	agents []string
	mu     sync.Mutex
	held   map[string]hold
	timer  clock.Timer
	done   bool
}

// hold is a lease this replica holds: the revision of its record (the
// fencing token) and when it was last renewed, by the time the record's
// expiry was reckoned from (a renewal counts only once the store is known
// to have applied it).
type hold struct {
	rev     uint64
	renewed time.Time
}

// New returns a Manager for agents; Start it.
func New(agents []string, o Options) (*Manager, error) {
	if o.Store == nil || o.Holder == "" {
		return nil, errors.New("lease: a store and a holder name are required")
	}
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.TTL <= 0 {
		o.TTL = 15 * time.Second
	}
	if o.RenewEvery <= 0 {
		o.RenewEvery = o.TTL / 3
	}
	as := append([]string(nil), agents...)
	sort.Strings(as)
	return &Manager{o: o, agents: as, held: map[string]hold{}}, nil
}

func key(agent string) string { return "lease." + agent }

// Start takes every free lease now and then keeps renewing and seeking
// them every RenewEvery until Stop.
func (m *Manager) Start(ctx context.Context) {
	m.round(ctx)
	m.arm()
}

func (m *Manager) arm() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done {
		return
	}
	m.timer = m.o.Clock.AfterFunc(m.o.RenewEvery, func() {
		m.round(context.Background())
		m.arm()
	})
}

// Held reports whether this replica holds the agent's lease.
func (m *Manager) Held(agent string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.held[agent]
	return ok
}

// round renews held leases and tries to take free or expired ones.
func (m *Manager) round(ctx context.Context) {
	for _, a := range m.agents {
		ctx, cancel := context.WithTimeout(ctx, m.o.RenewEvery)
		gained, lost := m.step(ctx, a)
		cancel()
		if gained && m.o.OnAcquire != nil {
			m.o.OnAcquire(a)
		}
		if lost && m.o.OnLose != nil {
			m.o.OnLose(a)
		}
	}
}

// step renews or seeks one agent's lease.
func (m *Manager) step(ctx context.Context, agent string) (gained, lost bool) {
	m.mu.Lock()
	h, holding := m.held[agent]
	done := m.done
	m.mu.Unlock()
	if done {
		return false, false
	}
	now := m.o.Clock.Now()
	mine, _ := json.Marshal(record{Holder: m.o.Holder, Expires: now.Add(m.o.TTL)})
	if holding {
		newRev, err := m.o.Store.Update(ctx, key(agent), mine, h.rev)
		switch {
		case err == nil:
			m.setHeld(agent, hold{rev: newRev, renewed: now})
			return false, false
		case errors.Is(err, store.ErrConflict):
			// The record changed since our last confirmed renewal: maybe
			// another replica's write, maybe our own renewal whose reply
			// was lost (a timeout or reconnect after the server applied
			// it). Read it to tell which.
			return false, m.recheck(ctx, agent, h, now, mine)
		case errors.Is(err, store.ErrNotFound):
			return false, m.lose(agent)
		}
		return false, m.unconfirmed(agent, h, now, err)
	}
	rec, err := m.o.Store.Get(ctx, key(agent))
	switch {
	case errors.Is(err, store.ErrNotFound):
		newRev, err := m.o.Store.Create(ctx, key(agent), mine, 0)
		if err != nil {
			return false, false // another replica was quicker, or the store is down
		}
		m.setHeld(agent, hold{rev: newRev, renewed: now})
		m.o.Log.Info("lease taken", "agent", agent, "holder", m.o.Holder)
		return true, false
	case err != nil:
		return false, false
	}
	var cur record
	if json.Unmarshal(rec.Value, &cur) == nil && cur.Holder != m.o.Holder && now.Before(cur.Expires) {
		return false, false // held by a live replica
	}
	newRev, err := m.o.Store.Update(ctx, key(agent), mine, rec.Revision)
	if err != nil {
		return false, false
	}
	m.setHeld(agent, hold{rev: newRev, renewed: now})
	m.o.Log.Info("lease taken over", "agent", agent, "holder", m.o.Holder, "previous", cur.Holder, "expired", cur.Expires)
	return true, false
}

// recheck settles a renewal that conflicted. The lease is lost only if
// its record is gone or names another holder (or has expired); a record
// that still names this replica is our own renewal whose reply we never
// got, and we keep the lease and renew it once more. It reports whether
// the lease was lost.
func (m *Manager) recheck(ctx context.Context, agent string, h hold, now time.Time, mine []byte) (lost bool) {
	for range 3 {
		rec, err := m.o.Store.Get(ctx, key(agent))
		if errors.Is(err, store.ErrNotFound) {
			return m.lose(agent)
		}
		if err != nil {
			return m.unconfirmed(agent, h, now, err)
		}
		var cur record
		if json.Unmarshal(rec.Value, &cur) != nil || cur.Holder != m.o.Holder {
			return m.lose(agent, "current", cur.Holder)
		}
		if !now.Before(cur.Expires) {
			m.o.Log.Warn("lease expired before its renewal was confirmed; letting the agent go", "agent", agent, "expired", cur.Expires)
			m.drop(agent)
			return true
		}
		// Fencing: the record names us and has not expired, so it is our
		// own renewal. Holder is unique to this replica, and no other
		// replica writes over a live lease (it takes one only after
		// expiry, and its record then names it). So nobody else has
		// written the key since our lost renewal, and its current
		// revision is exactly the token that renewal would have returned
		// had its reply arrived. Adopting it fences no less than before:
		// any later write by another holder changes the revision and
		// fails our next compare-and-set. Adopting a revision whose
		// record names anyone else would be unsafe, and is a loss above.
		// The record's expiry, not our clock, dates this confirmed
		// renewal, so we still let go in time if the store stays out of
		// reach.
		h = hold{rev: rec.Revision, renewed: cur.Expires.Add(-m.o.TTL)}
		m.setHeld(agent, h)
		m.o.Log.Info("lease renewal had already been applied; keeping it", "agent", agent, "revision", rec.Revision)
		newRev, err := m.o.Store.Update(ctx, key(agent), mine, rec.Revision)
		switch {
		case err == nil:
			m.setHeld(agent, hold{rev: newRev, renewed: now})
			return false
		case errors.Is(err, store.ErrNotFound):
			return m.lose(agent)
		case !errors.Is(err, store.ErrConflict):
			return m.unconfirmed(agent, h, now, err)
		}
		// Written again between our read and our write: read again.
	}
	return m.lose(agent)
}

// unconfirmed handles a renewal whose outcome is unknown (the store is
// unreachable, or the request timed out and may yet have been applied):
// we cannot prove we still hold the lease, so we keep it only until
// TTL - RenewEvery after the last confirmed renewal, letting go before
// another replica could take it over. It reports whether we let go.
func (m *Manager) unconfirmed(agent string, h hold, now time.Time, err error) (lost bool) {
	m.o.Log.Error("lease renewal failed", "agent", agent, "error", err)
	if now.Sub(h.renewed) >= m.o.TTL-m.o.RenewEvery {
		m.o.Log.Warn("lease could not be renewed in time; letting the agent go", "agent", agent)
		m.drop(agent)
		return true
	}
	return false
}

// lose lets the agent go because its lease is gone or another replica
// holds it.
func (m *Manager) lose(agent string, attrs ...any) (lost bool) {
	m.o.Log.Warn("lease lost to another replica; letting the agent go", append([]any{"agent", agent, "holder", m.o.Holder}, attrs...)...)
	m.drop(agent)
	return true
}

func (m *Manager) setHeld(agent string, h hold) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.held[agent] = h
}

func (m *Manager) drop(agent string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.held, agent)
}

// Stop stops renewing and releases held leases so another replica can
// take them at once (their agents are told lost first).
func (m *Manager) Stop(ctx context.Context) {
	m.mu.Lock()
	m.done = true
	if m.timer != nil {
		m.timer.Stop()
	}
	held := m.held
	m.held = map[string]hold{}
	m.mu.Unlock()
	for a, h := range held {
		if m.o.OnLose != nil {
			m.o.OnLose(a)
		}
		// Expire it now rather than delete: a CAS that fails means
		// someone else already holds it, which is fine.
		gone, _ := json.Marshal(record{Holder: "", Expires: time.Time{}})
		if _, err := m.o.Store.Update(ctx, key(a), gone, h.rev); err != nil && !errors.Is(err, store.ErrConflict) {
			m.o.Log.Warn("could not release a lease; it expires by itself", "agent", a, "error", fmt.Sprint(err))
		}
	}
}
