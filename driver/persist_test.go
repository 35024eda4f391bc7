package driver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/models/scripted"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// restart builds a second driver over st, as a restarted worker would.
func restart(t *testing.T, st store.Store, c *clock.Fake) (*Agent, *events.Subscription) {
	t.Helper()
	return restartWith(t, st, c, nil)
}

func TestPauseSurvivesRestart(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(epoch)
	st := memstore.New(c)
	a, _ := restart(t, st, c)
	a.Pause()
	b, sub := restart(t, st, c)
	wait.For(t, "restored pause", func() bool { return b.State() == Paused })
	b.Send(wakeMsg("while paused"))
	if err := b.Resume(""); err != nil {
		t.Fatal(err)
	}
	for e := range sub.C {
		if e.Type == events.TurnCompleted {
			break
		}
	}
	c2, _ := restart(t, st, c)
	wait.For(t, "restore", func() bool { c2.mu.Lock(); defer c2.mu.Unlock(); return c2.gate.restored })
	if c2.State() != Sleeping {
		t.Fatalf("resume did not clear the persisted pause: %s", c2.State())
	}
}

func TestRequestedWakeSurvivesRestart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{call("schedule_next_turn", map[string]any{"wake_in_seconds": 600}), text("later")})
	h.a.Send(wakeMsg("check again in 10 minutes"))
	h.waitEvent(events.TurnCompleted)
	h.waitIdle()
	b, sub := restart(t, h.d.deps.Store, h.clock)
	want := epoch.Add(10 * time.Minute)
	wait.For(t, "restored wake", func() bool { s := b.Status(); return s.NextWake != nil && s.NextWake.Equal(want) })
	h.d.Shutdown(context.Background()) // the old worker is gone
	h.clock.Advance(10 * time.Minute)
	for e := range sub.C {
		if e.Type == events.TurnStarted {
			break
		}
	}
	if _, err := h.d.deps.Store.Get(context.Background(), "timer.tester"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("served wake still persisted: %v", err)
	}
}

// flaky fails Get a few times, as a store that is briefly unreachable.
type flaky struct {
	store.Store
	fails atomic.Int32
}

func (f *flaky) Get(ctx context.Context, key string) (store.Entry, error) {
	if strings.HasPrefix(key, "agent.") && f.fails.Add(-1) >= 0 {
		return store.Entry{}, errors.New("store unreachable")
	}
	return f.Store.Get(ctx, key)
}

func TestFailedRestoreIsRetriedAndGatesTurns(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(epoch)
	mem := memstore.New(c)
	a0, _ := restart(t, mem, c)
	a0.Pause()
	st := &flaky{Store: mem}
	st.fails.Store(2)
	armed := c.Armed()
	a, _ := restart(t, st, c)
	a.Send(wakeMsg("arrives before the restore"))
	waitArmed(t, armed) // the first failure armed its retry
	if a.State() == Running {
		t.Fatal("a turn ran before state was restored")
	}
	armed = c.Armed()
	c.Advance(time.Second)
	waitArmed(t, armed) // the second failure armed its retry, twice as late
	c.Advance(2 * time.Second)
	wait.For(t, "restore after retries", func() bool { return a.State() == Paused })
}

func waitArmed(t *testing.T, armed <-chan struct{}) {
	t.Helper()
	select {
	case <-armed:
	case <-time.After(deadline):
		t.Fatal("no timer armed")
	}
}

// restartWith is restart with the driver reading log (nil: none).
func restartWith(t *testing.T, st store.Store, c *clock.Fake, log *memLog) (*Agent, *events.Subscription) {
	t.Helper()
	m, err := scripted.New("fake", config.Model{Script: []config.ScriptStep{text("ok")}, Loop: true})
	if err != nil {
		t.Fatal(err)
	}
	bus := events.NewBus(0, nil)
	sub := bus.Subscribe(100, nil)
	deps := Deps{Clock: c, Store: st, Events: bus}
	if log != nil {
		deps.Input = log
	}
	// The same history window as the harness's agent: a restart does not
	// change the config.
	d, err := New(deps, []Spec{{Name: "tester", Model: m, Tools: []string{"schedule_next_turn"}, HistoryTurns: 20}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Shutdown(context.Background()) })
	a, _ := d.Agent("tester")
	return a, sub
}

// The turn counter and the cursors survive a restart: the restarted
// agent counts on from the newest record and reads the log on from its
// cursors, so a message a recorded turn handled is not read again — also
// when the log still holds it (it is purged only after the record).
func TestTurnCounterAndCursorsSurviveRestart(t *testing.T) {
	t.Parallel()
	log := newMemLog()
	h := newHarnessWith(t, []config.ScriptStep{text("ok")}, withLog(log))
	m := wakeMsg("rotate the certificates")
	m.ID = "job-1"
	log.add(h.a, m)
	h.waitEvent(events.TurnCompleted)
	log.add(h.a, wakeMsg("second"))
	h.waitEvent(events.TurnCompleted)
	h.waitIdle()
	if log.cursor("in") != 2 {
		t.Fatalf("cursor %d after two recorded turns, want 2", log.cursor("in"))
	}
	h.d.Shutdown(context.Background())

	// The log never purged job-1 (memLog keeps everything).
	b, sub := restartWith(t, h.d.deps.Store, h.clock, log)
	log.add(b, wakeMsg("third"))
	for e := range sub.C {
		if e.Type == events.TurnCompleted {
			if n := e.Data["turn"]; n != uint64(3) {
				t.Fatalf("the turn after a restart is number %v, want 3", n)
			}
			if ids, _ := e.Data["ids"].([]string); e.Data["messages"] != 1 || slices.Contains(ids, "job-1") {
				t.Fatalf("job-1 ran again: %v", e.Data)
			}
			break
		}
	}
	if s := b.Status(); s.Turns != 3 {
		t.Fatalf("status counts %d turns, want 3", s.Turns)
	}
}

// Nothing is read from the log before the agent's state is restored:
// while the store fails, the agent does not know its cursors, and a read
// then would take handled messages for new ones. On the old layout this
// was the handled-id check at restore.
func TestNothingIsReadBeforeTheCursorsAreRestored(t *testing.T) {
	t.Parallel()
	log := newMemLog()
	h := newHarnessWith(t, []config.ScriptStep{text("ok")}, withLog(log))
	m := wakeMsg("rotate the certificates")
	m.ID = "job-1"
	log.add(h.a, m)
	h.waitEvent(events.TurnCompleted)
	h.waitIdle()
	h.d.Shutdown(context.Background())

	fs := &flaky{Store: h.d.deps.Store}
	fs.fails.Store(2) // restore fails twice
	c := h.clock
	mm, _ := scripted.New("fake", config.Model{Script: []config.ScriptStep{text("ok")}, Loop: true})
	bus := events.NewBus(0, nil)
	sub := bus.Subscribe(100, nil)
	d, err := New(Deps{Clock: c, Store: fs, Events: bus, Input: log}, []Spec{{Name: "tester", Model: mm}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := d.Agent("tester")
	reads := log.readCount()
	armed := c.Armed()
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Shutdown(context.Background()) })
	b.Notify()          // news arrives before the agent knows its cursors
	waitArmed(t, armed) // the first failed restore armed its retry
	if n := log.readCount(); n != reads {
		t.Fatalf("%d reads before the restore", n-reads)
	}
	armed = c.Armed()
	c.Advance(time.Second)
	waitArmed(t, armed) // the second, twice as late
	c.Advance(2 * time.Second)
	wait.For(t, "restored and read", func() bool { return log.readCount() > reads })
	if s := b.Status(); s.InboxPending != 0 || s.Turns != 1 {
		t.Fatalf("after restore: %+v", s)
	}
	select {
	case e := <-sub.C:
		if e.Type == events.TurnStarted {
			t.Fatal("a turn ran for a message already handled")
		}
	default:
	}
}

// gatedGets holds every Get of the paused records until opened, counting
// how many wait at once.
type gatedGets struct {
	store.Store
	open          chan struct{}
	waiting, most atomic.Int64
}

func (g *gatedGets) Get(ctx context.Context, key string) (store.Entry, error) {
	if strings.HasSuffix(key, ".paused") {
		n := g.waiting.Add(1)
		for {
			m := g.most.Load()
			if n <= m || g.most.CompareAndSwap(m, n) {
				break
			}
		}
		<-g.open
		g.waiting.Add(-1)
	}
	return g.Store.Get(ctx, key)
}

// A driver restores at most restoreLanes agents at once: a replica that
// gains thousands of agents does not read all their state together (it
// starved its lease round and timed out the store's health probe), and
// every agent is restored in the end.
func TestAgentsRestoreAFewAtATime(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(epoch)
	st := &gatedGets{Store: memstore.New(c), open: make(chan struct{})}
	m, err := scripted.New("fake", config.Model{Script: []config.ScriptStep{text("ok")}, Loop: true})
	if err != nil {
		t.Fatal(err)
	}
	var specs []Spec
	for i := range 3 * restoreLanes {
		specs = append(specs, Spec{Name: fmt.Sprintf("a%02d", i), Model: m})
	}
	d, err := New(Deps{Clock: c, Store: st}, specs)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Shutdown(context.Background()) })
	wait.For(t, "a lane's worth of restores under way", func() bool { return st.waiting.Load() == restoreLanes })
	close(st.open)
	for _, a := range d.Agents() {
		wait.For(t, a.spec.Name+" restored", func() bool { a.mu.Lock(); defer a.mu.Unlock(); return a.gate.restored })
	}
	if most := st.most.Load(); most > restoreLanes {
		t.Fatalf("%d agents restored at once; want at most %d", most, restoreLanes)
	}
}

// putsDown is a store whose writes fail while down is set.
type putsDown struct {
	store.Store
	down atomic.Bool
}

func (s *putsDown) Put(ctx context.Context, key string, v []byte) (uint64, error) {
	if s.down.Load() {
		return 0, errStoreDown
	}
	return s.Store.Put(ctx, key, v)
}

// A pause whose write fails while the store is out is written once it is
// back, without another operator call: the pause survives a restart
// after the outage (before, the write was given up and logged as "will
// not survive a restart").
func TestAPauseWrittenDuringAStoreOutageIsStoredOnceItIsBack(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(epoch)
	mem := memstore.New(c)
	st := &putsDown{Store: mem}
	a, _ := restart(t, st, c)
	wait.For(t, "restore", func() bool { a.mu.Lock(); defer a.mu.Unlock(); return a.gate.restored })
	st.down.Store(true)
	a.Pause()
	if _, err := mem.Get(context.Background(), a.key("paused")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the pause is stored while the store is down: %v", err)
	}
	st.down.Store(false)
	wait.For(t, "the pause written again", func() bool {
		c.Advance(time.Second)
		_, err := mem.Get(context.Background(), a.key("paused"))
		return err == nil
	})
	b, _ := restart(t, mem, c)
	wait.For(t, "restored pause", func() bool { return b.State() == Paused })
}
