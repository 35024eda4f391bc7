// Package lease gives each agent exactly one owner among the worker
// replicas that share a store: a replica runs an agent's turns, consumes
// its messages and fires its timers only while it holds the agent's lease.
// A lease is a store key holding the holder and an expiry, taken and
// renewed with compare-and-set, so the store's revision of the key is a
// fencing token: a deposed holder's renewal fails and it lets go at once.
// It must not decide what an owner does.
//
// Guarantees: at most one replica believes it holds a lease at a time,
// provided replicas' clocks differ by less than TTL - RenewEvery; when a
// holder dies, another replica takes over within TTL + RenewEvery.
// Not guaranteed: a holder cut off from the store keeps running until its
// next failed renewal (at most RenewEvery).
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
	// Holder names this replica (host, pid, random); required.
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
// fencing token) and when it was last renewed.
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
		if err == nil {
			m.setHeld(agent, newRev)
			return false, false
		}
		if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
			m.o.Log.Warn("lease lost to another replica; letting the agent go", "agent", agent, "holder", m.o.Holder)
			m.drop(agent)
			return false, true
		}
		// The store is unreachable: we cannot prove we still hold it.
		// Let go before another replica could take it over.
		m.o.Log.Error("lease renewal failed", "agent", agent, "error", err)
		if now.Sub(h.renewed) >= m.o.TTL-m.o.RenewEvery {
			m.o.Log.Warn("lease could not be renewed in time; letting the agent go", "agent", agent)
			m.drop(agent)
			return false, true
		}
		return false, false
	}
	rec, err := m.o.Store.Get(ctx, key(agent))
	switch {
	case errors.Is(err, store.ErrNotFound):
		newRev, err := m.o.Store.Create(ctx, key(agent), mine, 0)
		if err != nil {
			return false, false // another replica was quicker, or the store is down
		}
		m.setHeld(agent, newRev)
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
	m.setHeld(agent, newRev)
	m.o.Log.Info("lease taken over", "agent", agent, "holder", m.o.Holder, "previous", cur.Holder, "expired", cur.Expires)
	return true, false
}

func (m *Manager) setHeld(agent string, rev uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.held[agent] = hold{rev: rev, renewed: m.o.Clock.Now()}
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
