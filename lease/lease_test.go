package lease

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memstore"
)

type log struct {
	mu     sync.Mutex
	events []string
	ms     []*Manager // whose callbacks add events
}

func (l *log) add(s string) { l.mu.Lock(); l.events = append(l.events, s); l.mu.Unlock() }

// watch has all wait for m's queued callbacks.
func (l *log) watch(m *Manager) { l.mu.Lock(); l.ms = append(l.ms, m); l.mu.Unlock() }

// all returns the events, once every callback queued so far has run.
func (l *log) all() []string {
	l.mu.Lock()
	ms := slices.Clone(l.ms)
	l.mu.Unlock()
	for _, m := range ms {
		m.flushCalls()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events...)
}

func replica(t *testing.T, name string, st store.Store, c *clock.Fake, l *log) *Manager {
	t.Helper()
	m, err := New([]string{"a", "b"}, Options{Store: st, Clock: c, Holder: name, TTL: 15 * time.Second,
		OnAcquire: func(agent string, _ Gain) { l.add(name + "+" + agent) },
		OnLose:    func(agent string, _ Reason) { l.add(name + "-" + agent) },
	})
	if err != nil {
		t.Fatal(err)
	}
	l.watch(m)
	m.Start(context.Background())
	return m
}

func TestOneOwnerAndTakeoverAfterTheHolderDies(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	st := memstore.New(c)
	l := &log{}
	r1 := replica(t, "r1", st, c, l)
	r2 := replica(t, "r2", st, c, l)
	c.Advance(time.Minute) // many renewal rounds
	for _, a := range []string{"a", "b"} {
		if !r1.Held(a) || r2.Held(a) {
			t.Fatalf("agent %s: r1 %v r2 %v, want only r1", a, r1.Held(a), r2.Held(a))
		}
	}
	// r1 dies: it stops renewing without releasing.
	r1.mu.Lock()
	r1.done = true
	r1.timer.Stop()
	r1.mu.Unlock()
	c.Advance(10 * time.Second)
	if r2.Held("a") {
		t.Fatal("r2 took the lease before it expired")
	}
	c.Advance(10 * time.Second) // past TTL + one round
	if !r2.Held("a") || !r2.Held("b") {
		t.Fatalf("r2 did not take over within TTL + RenewEvery: %v", l.all())
	}
	// r1 gained both, then r2 both; a round works on agents in parallel,
	// so the order within each pair is not fixed.
	got := l.all()
	if len(got) != 4 || !slices.Equal(slices.Sorted(slices.Values(got[:2])), []string{"r1+a", "r1+b"}) ||
		!slices.Equal(slices.Sorted(slices.Values(got[2:])), []string{"r2+a", "r2+b"}) {
		t.Fatalf("events %v, want r1+a and r1+b, then r2+a and r2+b", got)
	}
}

func TestStopReleasesAtOnce(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	st := memstore.New(c)
	l := &log{}
	r1 := replica(t, "r1", st, c, l)
	r2 := replica(t, "r2", st, c, l)
	r1.Stop(context.Background())
	c.Advance(5 * time.Second) // one round of r2
	if !r2.Held("a") {
		t.Fatalf("r2 did not take a released lease in its next round: %v", l.all())
	}
}

// cut is a store the test can cut off.
type cut struct {
	store.Store
	down atomic.Bool
}

func (c *cut) Update(ctx context.Context, k string, v []byte, rev uint64) (uint64, error) {
	if c.down.Load() {
		return 0, errors.New("store unreachable")
	}
	return c.Store.Update(ctx, k, v, rev)
}

func TestHolderCutOffFromTheStoreLetsGoBeforeExpiry(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	st := &cut{Store: memstore.New(c)}
	l := &log{}
	r1 := replica(t, "r1", st, c, l)
	st.down.Store(true)
	c.Advance(10 * time.Second) // TTL - RenewEvery since the last renewal
	if r1.Held("a") {
		t.Fatalf("r1 still holds a lease it could not renew for 10s of a 15s TTL: %v", l.all())
	}
}

// stuck is a store whose Updates, while armed, hang until released: a
// renewal round stuck on an unreachable store.
type stuck struct {
	store.Store
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (s *stuck) Update(ctx context.Context, k string, v []byte, rev uint64) (uint64, error) {
	if s.armed.Load() {
		select {
		case s.entered <- struct{}{}:
		default:
		}
		<-s.release
		return 0, errors.New("store unreachable")
	}
	return s.Store.Update(ctx, k, v, rev)
}

// A holder whose renewal hangs on an unreachable store still holds its
// leases (no round has let them go), but from TTL - RenewEvery after its
// last confirmed renewal its word on them is in doubt: another replica may
// have taken them. Before that it is sure.
func TestAHolderStuckOnTheStoreDoubtsItsLeasesAtTheLapse(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	st := &stuck{Store: memstore.New(c), entered: make(chan struct{}, 1), release: make(chan struct{})}
	r1 := replica(t, "r1", st, c, &log{})
	if !r1.Held("a") || !r1.Sure() || r1.Doubt("a") != "" || r1.Doubt("nobody") != "" {
		t.Fatalf("r1 holds a: %v, doubt %q", r1.Held("a"), r1.Doubt("a"))
	}
	st.armed.Store(true)
	go c.Advance(5 * time.Second) // the renewal is due, and hangs (the fake clock runs it here)
	<-st.entered
	c.Advance(4 * time.Second)
	if d := r1.Doubt("a"); d != "" {
		t.Fatalf("9s after a confirmed renewal of a 15s lease, r1 doubts it: %q", d)
	}
	c.Advance(time.Second)
	d := r1.Doubt("a")
	if !r1.Held("a") || r1.Sure() || !strings.Contains(d, "unconfirmed") || !strings.Contains(d, "10s ago") {
		t.Fatalf("at the lapse: held %v, doubt %q", r1.Held("a"), d)
	}
	st.armed.Store(false)
	close(st.release)
}
