package lease

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// placer is a membership the test sets: agent → owner, and who may take
// what by the safety net.
type placer struct {
	mu       sync.Mutex
	owner    map[string]string
	strictly map[string]bool // not eligible unless owner
}

func (p *placer) set(agent, owner string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.owner[agent] = owner
}

func (p *placer) place(self string) func(string) Placement {
	return func(agent string) Placement {
		p.mu.Lock()
		defer p.mu.Unlock()
		return Placement{Owner: p.owner[agent], Eligible: !p.strictly[agent] || p.owner[agent] == self}
	}
}

// drainer stands for the driver: OnDrain waits until the test lets the
// "running turn" finish.
type drainer struct {
	mu        sync.Mutex
	turn      chan struct{} // closed: no turn runs
	drained   []string
	undrained []string
}

func newDrainer() *drainer {
	d := &drainer{turn: make(chan struct{})}
	close(d.turn)
	return d
}

func (d *drainer) running() {
	d.mu.Lock()
	d.turn = make(chan struct{})
	d.mu.Unlock()
}

func (d *drainer) finish() {
	d.mu.Lock()
	close(d.turn)
	d.mu.Unlock()
}

func (d *drainer) drain(ctx context.Context, agent string) error {
	d.mu.Lock()
	turn := d.turn
	d.mu.Unlock()
	select {
	case <-turn:
		d.mu.Lock()
		d.drained = append(d.drained, agent)
		d.mu.Unlock()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *drainer) undrain(agent string) {
	d.mu.Lock()
	d.undrained = append(d.undrained, agent)
	d.mu.Unlock()
}

type spreadReplica struct {
	*Manager
	name     string
	released chan [2]string // agent, to
}

func spreadRep(t *testing.T, name string, st store.Store, c *clock.Fake, l *log, p *placer, d *drainer, agents ...string) *spreadReplica {
	t.Helper()
	r := &spreadReplica{name: name, released: make(chan [2]string, 100)}
	m, err := New(agents, Options{Store: st, Clock: c, Holder: name, TTL: 15 * time.Second,
		Assign:     p.place(name),
		OnAcquire:  func(agent string, _ Gain) { l.add(name + "+" + agent) },
		OnLose:     func(agent string, why Reason) { l.add(name + "-" + agent + ":" + string(why)) },
		OnDrain:    d.drain,
		OnUndrain:  d.undrain,
		OnReleased: func(agent, to string) { r.released <- [2]string{agent, to} },
	})
	if err != nil {
		t.Fatal(err)
	}
	r.Manager = m
	l.watch(m)
	m.Start(context.Background())
	t.Cleanup(func() { m.Stop(context.Background()) })
	return r
}

func TestFreeLeasesAreTakenOnlyByTheReplicaTheyArePlacedOn(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	st := memstore.New(c)
	l := &log{}
	p := &placer{owner: map[string]string{"a": "r1", "b": "r2"}}
	d := newDrainer()
	r1 := spreadRep(t, "r1", st, c, l, p, d, "a", "b")
	r2 := spreadRep(t, "r2", st, c, l, p, d, "a", "b")
	if !r1.Held("a") || r1.Held("b") || !r2.Held("b") || r2.Held("a") {
		t.Fatalf("r1 holds a %v b %v, r2 holds a %v b %v: want a on r1, b on r2", r1.Held("a"), r1.Held("b"), r2.Held("a"), r2.Held("b"))
	}
	c.Advance(time.Minute)
	if !r1.Held("a") || !r2.Held("b") || r1.Held("b") || r2.Held("a") {
		t.Fatal("placement did not hold across renewals")
	}
}

// A replica that sees an agent it holds placed on another live replica
// lets the running turn finish, releases the lease naming that replica,
// which takes it when kicked — at once, not at its next round.
func TestHandoverWaitsForTheTurnThenReleasesForTheNewOwner(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	st := memstore.New(c)
	l := &log{}
	p := &placer{owner: map[string]string{"a": "r1"}}
	d := newDrainer()
	r1 := spreadRep(t, "r1", st, c, l, p, d, "a")
	r2 := spreadRep(t, "r2", st, c, l, p, d, "a")
	if !r1.Held("a") {
		t.Fatal("r1 does not hold a")
	}
	d.running() // a turn runs on r1
	p.set("a", "r2")
	r1.Rebalance()
	wait.Within(t, 10*time.Second, "the handover to start", func() bool {
		r1.mu.Lock()
		defer r1.mu.Unlock()
		return r1.handing["a"] != nil
	})
	c.Advance(time.Minute) // many rounds while the turn runs: r1 keeps renewing
	if !r1.Held("a") || r2.Held("a") {
		t.Fatalf("during the turn: r1 %v r2 %v, want r1 still holding", r1.Held("a"), r2.Held("a"))
	}
	d.finish()
	var rel [2]string
	select {
	case rel = <-r1.released:
	case <-time.After(10 * time.Second):
		t.Fatal("r1 never released a")
	}
	if rel != [2]string{"a", "r2"} {
		t.Fatalf("released %v, want a for r2", rel)
	}
	if r1.Held("a") {
		t.Fatal("r1 still holds a after the handover")
	}
	// Free for r2 — or r2's already (a kick armed for the lease's expiry
	// may have come first).
	if rec, _ := holderOf(t, st, "a"); (rec.Holder != "" || rec.To != "r2") && rec.Holder != "r2" {
		t.Fatalf("record after release %+v, want free for r2, or r2's", rec)
	}
	r2.Kick("a") // the released notice
	wait.Within(t, 10*time.Second, "r2 to take a", func() bool { return r2.Held("a") })
	want := []string{"r1+a", "r1-a:handed_over", "r2+a"}
	if got := l.all(); len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("events %v, want %v", got, want)
	}
}

// A handover whose placement flips back before the turn ends is called
// off: the agent stays, nothing is released, the drain is undone.
func TestHandoverIsCalledOffWhenThePlacementChangesBack(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	st := memstore.New(c)
	l := &log{}
	p := &placer{owner: map[string]string{"a": "r1"}}
	d := newDrainer()
	r1 := spreadRep(t, "r1", st, c, l, p, d, "a")
	d.running()
	p.set("a", "r2")
	r1.Rebalance()
	wait.Within(t, 10*time.Second, "the handover to start", func() bool {
		r1.mu.Lock()
		defer r1.mu.Unlock()
		return r1.handing["a"] != nil
	})
	p.set("a", "r1") // r2 died before the turn ended
	r1.Rebalance()
	wait.Within(t, 10*time.Second, "the handover to end", func() bool {
		r1.mu.Lock()
		defer r1.mu.Unlock()
		return r1.handing["a"] == nil
	})
	c.Advance(time.Minute)
	if !r1.Held("a") {
		t.Fatal("r1 let a go after the handover was called off")
	}
	select {
	case rel := <-r1.released:
		t.Fatalf("released %v", rel)
	default:
	}
	if got := l.all(); len(got) != 1 {
		t.Fatalf("events %v, want only r1+a", got)
	}
}

// A lease lost while its turn drains is a loss (the turn is cancelled by
// OnLose), never a second release.
func TestLeaseLostDuringAHandoverIsALoss(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	base := memstore.New(c)
	st := &cut{Store: base}
	l := &log{}
	p := &placer{owner: map[string]string{"a": "r1"}}
	d := newDrainer()
	r1 := spreadRep(t, "r1", st, c, l, p, d, "a")
	d.running()
	p.set("a", "r2")
	r1.Rebalance()
	wait.Within(t, 10*time.Second, "the handover to start", func() bool {
		r1.mu.Lock()
		defer r1.mu.Unlock()
		return r1.handing["a"] != nil
	})
	st.down.Store(true)
	c.Advance(15 * time.Second)
	if r1.Held("a") {
		t.Fatal("r1 still holds a lease it could not renew")
	}
	wait.Within(t, 10*time.Second, "the handover to end", func() bool {
		r1.mu.Lock()
		defer r1.mu.Unlock()
		return r1.handing["a"] == nil
	})
	d.finish()
	select {
	case rel := <-r1.released:
		t.Fatalf("released %v after losing the lease", rel)
	case <-time.After(50 * time.Millisecond):
	}
	// Let go with every other agent at the lapse: a loss (the running
	// turn is cancelled), told as Lapsed.
	if got := l.all(); len(got) != 2 || got[1] != "r1-a:lapsed" {
		t.Fatalf("events %v, want r1+a, r1-a:lapsed", got)
	}
}

// Replicas that disagree about placement cannot strand an agent: a free
// lease its placed replica leaves untaken for a whole TTL is taken by
// another — unless the agent is pinned elsewhere.
func TestAFreeLeaseNobodyTakesIsTakenAfterATTL(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	st := memstore.New(c)
	l := &log{}
	p := &placer{owner: map[string]string{"a": "ghost", "b": "ghost"}, strictly: map[string]bool{"b": true}}
	d := newDrainer()
	r1 := spreadRep(t, "r1", st, c, l, p, d, "a", "b")
	c.Advance(10 * time.Second)
	if r1.Held("a") {
		t.Fatal("r1 took a lease placed on another replica before a TTL passed")
	}
	c.Advance(10 * time.Second)
	if !r1.Held("a") {
		t.Fatal("r1 did not take a lease left free for a TTL")
	}
	if r1.Held("b") {
		t.Fatal("r1 took a pinned agent it is not eligible for")
	}
	// It is not handed straight back to the replica that left it free
	// (that would cost a TTL every time round)...
	c.Advance(30 * time.Second)
	if !r1.Held("a") {
		t.Fatal("r1 handed a back to the replica that had left it free")
	}
	// ...until the membership changes.
	r1.Rebalance()
	var rel [2]string
	select {
	case rel = <-r1.released:
	case <-time.After(10 * time.Second):
		t.Fatal("no handover after the membership changed")
	}
	if rel != [2]string{"a", "ghost"} {
		t.Fatalf("released %v", rel)
	}
}

// A replica that dies is replaced on the replicas its agents are placed
// on as soon as the leases expire (a kick armed at the expiry), within
// TTL + RenewEvery.
func TestTakeoverAfterDeathFollowsThePlacement(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	st := memstore.New(c)
	l := &log{}
	p := &placer{owner: map[string]string{"a": "r1", "b": "r1"}}
	d := newDrainer()
	r1 := spreadRep(t, "r1", st, c, l, p, d, "a", "b")
	r2 := spreadRep(t, "r2", st, c, l, p, d, "a", "b")
	r3 := spreadRep(t, "r3", st, c, l, p, d, "a", "b")
	// r1 dies: it stops renewing without releasing.
	r1.mu.Lock()
	r1.done = true
	r1.timer.Stop()
	r1.mu.Unlock()
	p.set("a", "r2")
	p.set("b", "r3")
	r2.Rebalance()
	r3.Rebalance()
	c.Advance(20 * time.Second) // TTL + RenewEvery
	wait.Within(t, 10*time.Second, "a on r2 and b on r3", func() bool { return r2.Held("a") && r3.Held("b") })
	if r2.Held("b") || r3.Held("a") {
		t.Fatal("an agent went to a replica it is not placed on")
	}
}

// Stop releases every lease for the replica it is placed on, and says so.
func TestStopReleasesForThePlacedReplica(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	st := memstore.New(c)
	l := &log{}
	p := &placer{owner: map[string]string{"a": "r1"}}
	d := newDrainer()
	r1 := spreadRep(t, "r1", st, c, l, p, d, "a")
	r2 := spreadRep(t, "r2", st, c, l, p, d, "a")
	p.set("a", "r2") // no round runs before Stop: no handover, a release
	r1.Stop(context.Background())
	rel := <-r1.released
	if rel != [2]string{"a", "r2"} {
		t.Fatalf("released %v, want a for r2", rel)
	}
	r2.Kick("a")
	wait.Within(t, 10*time.Second, "r2 to take a", func() bool { return r2.Held("a") })
	if got := l.all(); got[1] != "r1-a:released" {
		t.Fatalf("events %v", got)
	}
}

// The record of a released lease keeps whom it was released for.
func TestReleasedRecordFormat(t *testing.T) {
	t.Parallel()
	b, _ := json.Marshal(record{Holder: "", Expires: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), To: "r2"})
	if string(b) != `{"holder":"","expires":"2026-01-01T00:00:00Z","to":"r2"}` {
		t.Fatal(string(b))
	}
}
