package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/internal/syncbuf"
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// gains records each OnAcquire's Gain and each OnLose's reason.
type gains struct {
	mu    sync.Mutex
	gains map[string][]Gain
	loses map[string][]Reason
}

func newGains() *gains {
	return &gains{gains: map[string][]Gain{}, loses: map[string][]Reason{}}
}

func (g *gains) acquired(agent string, x Gain) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gains[agent] = append(g.gains[agent], x)
}

func (g *gains) lost(agent string, why Reason) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.loses[agent] = append(g.loses[agent], why)
}

func (g *gains) of(agent string) ([]Gain, []Reason) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Gain(nil), g.gains[agent]...), append([]Reason(nil), g.loses[agent]...)
}

// skewed is a clock that reads ahead of the fake one it wraps by skew,
// while its timers fire on the fake's time: a process woken from a
// freeze, whose clock has moved on and whose timers have not run yet.
type skewed struct {
	*clock.Fake
	skew atomic.Int64
}

func (s *skewed) Now() time.Time { return s.Fake.Now().Add(time.Duration(s.skew.Load())) }

// The moment a renewal is overdue, a holder's fences are gone, before any
// renewal round has run: a process that wakes from a freeze writes
// nothing under them, whatever its timers have not done yet.
func TestFenceTurnsFalseOnceARenewalIsOverdue(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC))
	c := &skewed{Fake: fake}
	st := memstore.New(fake)
	m, err := New([]string{"a"}, Options{Store: st, Clock: c, Holder: "r1", TTL: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	m.Start(context.Background())
	t.Cleanup(func() { m.Stop(context.Background()) })
	f, ok := m.Fence("a")
	if !ok || f.Key != "lease.a" || f.Revision == 0 {
		t.Fatalf("Fence(a) = %v, %v; want lease.a at its revision", f, ok)
	}
	if _, err := st.Fenced(f).Put(context.Background(), "agent.a.paused", []byte("x")); err != nil {
		t.Fatalf("a write under the held fence: %v", err)
	}
	c.skew.Store(int64(9 * time.Second))
	if _, ok := m.Fence("a"); !ok {
		t.Fatal("9s after the last renewal of a 15s lease, the fence is gone")
	}
	c.skew.Store(int64(10 * time.Second)) // TTL - RenewEvery: no timer has fired
	if _, ok := m.Fence("a"); ok {
		t.Fatal("10s after the last renewal of a 15s lease, with no renewal run, Fence(a) still says held")
	}
	if !m.Held("a") {
		t.Fatal("Held changed without a round: the test no longer shows Fence's own check")
	}
	if _, ok := m.Fence("b"); ok {
		t.Fatal("Fence of an agent not held")
	}
}

// A lapse nobody used costs nothing but the lapse: every agent is let go
// at once (OnLose, Lapsed), and taken back at the first renewal that
// lands, each as never moved (no restore needed) and under a new fence
// claimed in the store. An agent another replica took meanwhile comes
// back, later, as moved.
func TestALapseNobodyUsedIsTakenBackUnmoved(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC))
	base := memstore.New(c)
	st := &cut{Store: base}
	g := newGains()
	r1, err := New([]string{"a", "b"}, Options{Store: st, Clock: c, Holder: "r1", TTL: 15 * time.Second,
		OnAcquire: g.acquired, OnLose: g.lost})
	if err != nil {
		t.Fatal(err)
	}
	r1.Start(context.Background())
	t.Cleanup(func() { r1.Stop(context.Background()) })
	first, _ := g.of("a")
	if len(first) != 1 || !first[0].Moved {
		t.Fatalf("first gain of a: %+v, want one, moved (never held here before)", first)
	}
	st.down.Store(true)
	c.Advance(10 * time.Second)
	if r1.Held("a") || r1.Held("b") {
		t.Fatal("r1 still holds its leases 10s into an outage of a 15s lease")
	}
	// r2 takes b while r1 is cut off, and lets it go again.
	base.Fenced(first[0].Fence) // (a's old fence; unused)
	_, brev := holderOf(t, base, "b")
	r2, err := New([]string{"b"}, Options{Store: base, Clock: c, Holder: "r2", TTL: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c.Advance(10 * time.Second) // r1's record expired (TTL), and still cut off
	r2.Start(context.Background())
	if !r2.Held("b") {
		_, now := holderOf(t, base, "b")
		t.Fatalf("r2 did not take b from r1, cut off for 20s (b's revision %d, was %d)", now, brev)
	}
	r2.Stop(context.Background())
	st.down.Store(false)
	c.Advance(5 * time.Second)
	wait.Within(t, 10*time.Second, "r1 to hold a and b again", func() bool { return r1.Held("a") && r1.Held("b") })
	r1.flushCalls()
	ga, la := g.of("a")
	gb, lb := g.of("b")
	if len(la) != 1 || la[0] != Lapsed || len(lb) != 1 || lb[0] != Lapsed {
		t.Fatalf("losses: a %v, b %v; want one Lapsed each", la, lb)
	}
	if len(ga) != 2 || ga[1].Moved {
		t.Fatalf("gains of a: %+v; want the first, then one not moved (nobody took it)", ga)
	}
	if len(gb) != 2 || !gb[1].Moved {
		t.Fatalf("gains of b: %+v; want the first, then one moved (r2 held it meanwhile)", gb)
	}
	if ga[1].Fence == ga[0].Fence {
		t.Fatalf("a was taken back under its old fence %v", ga[0].Fence)
	}
	ctx := context.Background()
	if _, err := base.Fenced(ga[0].Fence).Put(ctx, "agent.a.model", []byte("x")); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a write under a's fence from before the lapse: err = %v, want ErrFenced", err)
	}
	if f, ok := r1.Fence("a"); !ok || f != ga[1].Fence {
		t.Fatalf("Fence(a) = %v, %v; want the fence of the gain, %v", f, ok, ga[1].Fence)
	}
}

// A let-go says so in one line for all its agents, never one per agent,
// and one more line when they are back.
func TestALetGoIsOneLine(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC))
	st := &cut{Store: memstore.New(c)}
	var buf syncbuf.Buffer
	agents := make([]string, 300)
	for i := range agents {
		agents[i] = fmt.Sprintf("agent-%03d", i)
	}
	var letGo atomic.Int64
	m, err := New(agents, Options{Store: st, Clock: c, Holder: "r1", TTL: 15 * time.Second,
		Log:     slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})),
		OnLetGo: func(why string, n int) { letGo.Add(int64(n)) }})
	if err != nil {
		t.Fatal(err)
	}
	m.Start(context.Background())
	t.Cleanup(func() { m.Stop(context.Background()) })
	buf.Reset()
	st.down.Store(true)
	c.Advance(10 * time.Second)
	st.down.Store(false)
	c.Advance(5 * time.Second)
	wait.Within(t, 10*time.Second, "every agent taken back", func() bool { return len(m.HeldAgents()) == len(agents) })
	wait.Within(t, 10*time.Second, "the line saying so", func() bool { return strings.Contains(buf.String(), "agents taken back") })
	out := buf.String()
	if n := strings.Count(out, "letting every agent go"); n != 1 {
		t.Errorf("%d let-go lines, want 1:\n%s", n, out)
	}
	if n := strings.Count(out, "agent="); n > 0 {
		t.Errorf("%d lines name an agent at a let-go of %d:\n%s", n, len(agents), clip(out))
	}
	if !strings.Contains(out, "agents=300") || !strings.Contains(out, "why=late_renewal") {
		t.Errorf("the let-go line does not say how many and why:\n%s", clip(out))
	}
	if !strings.Contains(out, "taken_back=300") {
		t.Errorf("the take-back line does not say all 300 came back unchanged:\n%s", clip(out))
	}
	if letGo.Load() != int64(len(agents)) {
		t.Errorf("OnLetGo told of %d agents, want %d", letGo.Load(), len(agents))
	}
	if d := m.Lagging(); d == "" {
		t.Errorf("Lagging after a let-go = %q", d)
	}
}

func clip(s string) string {
	if len(s) > 3000 {
		return s[:3000] + "…"
	}
	return s
}

// busy is a store whose reads of lease records hang while armed, as a
// connection does that is deep in a bulk of reads (10,000 restores, a
// burst): every round over the agents waits on it.
type busy struct {
	store.Store
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (b *busy) Get(ctx context.Context, k string) (store.Entry, error) {
	if b.armed.Load() && strings.HasPrefix(k, "lease.") {
		select {
		case b.entered <- struct{}{}:
		default:
		}
		select {
		case <-b.release:
		case <-ctx.Done():
			return store.Entry{}, ctx.Err()
		}
	}
	return b.Store.Get(ctx, k)
}

// Renewals go on while a round over the agents is stuck behind the
// store's bulk work: the renewal of the replica record never waits for a
// round (the seeking, read-backs and placements run apart from it).
func TestRenewalsGoOnWhileARoundIsStuck(t *testing.T) {
	t.Parallel()
	base := memstore.New(nil)
	st := &busy{Store: base, entered: make(chan struct{}, 1), release: make(chan struct{})}
	renewed := make(chan error, 100)
	agents := []string{"a", "b", "c"}
	m, err := New(agents, Options{Store: st, Renewal: base, Holder: "r1", TTL: 600 * time.Millisecond,
		OnRenewed: func(_ time.Duration, err error) {
			select {
			case renewed <- err:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	// b and c are held by a live replica elsewhere, so every round reads
	// their lease records.
	other, err := New([]string{"b", "c"}, Options{Store: base, Holder: "r0", TTL: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	other.Start(context.Background())
	t.Cleanup(func() { other.Stop(context.Background()) })
	m.Start(context.Background())
	t.Cleanup(func() {
		st.armed.Store(false)
		close(st.release)
		m.Stop(context.Background())
	})
	for len(renewed) > 0 {
		<-renewed
	}
	st.armed.Store(true)
	<-st.entered // a round is stuck on the store
	for i := range 6 {
		select {
		case err := <-renewed:
			if err != nil {
				t.Fatalf("renewal %d while a round is stuck: %v", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no renewal within 10s while a round is stuck (%d came)", i)
		}
	}
	if !m.Sure() || !m.Held("a") {
		t.Fatalf("after 6 renewals with a round stuck: sure %v, holds a %v", m.Sure(), m.Held("a"))
	}
}

// A replica that cannot do its agents' work (Live fails: its main
// connection is down) stops renewing its record, though Renewal answers,
// and lets its agents go as one cut off from the store does.
func TestAReplicaThatIsNotLiveStopsRenewing(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC))
	st := memstore.New(c)
	var down atomic.Bool
	m, err := New([]string{"a"}, Options{Store: st, Renewal: st, Clock: c, Holder: "r1", TTL: 15 * time.Second,
		Live: func() error {
			if down.Load() {
				return errors.New("NATS: CLOSED")
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	m.Start(context.Background())
	t.Cleanup(func() { m.Stop(context.Background()) })
	_, before := replicaOf(t, st, "r1")
	down.Store(true)
	c.Advance(10 * time.Second)
	if _, after := replicaOf(t, st, "r1"); after != before {
		t.Fatalf("the record was renewed (revision %d → %d) while the replica could not work", before, after)
	}
	if m.Held("a") {
		t.Fatal("r1 still holds a 10s into not being live, with a 15s lease")
	}
}
