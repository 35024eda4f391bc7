package driver

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/internal/syncbuf"
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/scheduler"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// believedLease is a lease manager as a frozen process sees it: it goes on
// believing it holds the fence it was given until the test says it
// noticed otherwise; the store alone knows the lease moved.
type believedLease struct {
	mu sync.Mutex
	f  store.Fence
	ok bool
}

func (b *believedLease) set(f store.Fence, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.f, b.ok = f, ok
}

func (b *believedLease) Owns(string) bool { _, ok := b.Fence(""); return ok }

func (b *believedLease) Fence(string) (store.Fence, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.f, b.ok
}

// takeLease writes the agent's lease record in st (as a replica taking it
// would) and claims it; it returns the fence.
func takeLease(t *testing.T, st store.Store, holder string) store.Fence {
	t.Helper()
	rev, err := st.Put(context.Background(), "lease.tester", []byte(holder))
	if err != nil {
		t.Fatal(err)
	}
	f := store.Fence{Key: "lease.tester", Revision: rev}
	if err := st.Claim(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	return f
}

// fencedHarness is a harness whose agent is leased in st under lease, its
// input in log, its log lines in out.
func fencedHarness(t *testing.T, script []config.ScriptStep, st store.Store, lease *believedLease, log *memLog, out *syncbuf.Buffer, deps ...func(*Deps)) *harness {
	t.Helper()
	return newHarnessWith(t, script, func(d *Deps) {
		d.Store, d.Input, d.Leased = st, log, true
		d.Log = slog.New(slog.NewTextHandler(out, nil))
		d.Scheduler = scheduler.New(scheduler.Options{Store: st, Clock: d.Clock, Owner: lease})
		for _, f := range deps {
			f(d)
		}
	})
}

// A replica frozen while its turn ran (the model had answered; the lease
// manager has not run since) wakes to a lease another replica took: the
// store refuses the turn's record, which was written under the fence the
// turn began under. The turn is abandoned: nothing recorded, no
// completion, no handled message, its message neither settled nor
// requeued here — the log gives it to the owner. On the old code the
// record landed and the turn completed.
func TestATurnWhoseLeaseMovedWhileItWasFrozenRecordsNothing(t *testing.T) {
	t.Parallel()
	st := memstore.New(clock.NewFake(epoch))
	lease, log, out := &believedLease{}, newMemLog(), &syncbuf.Buffer{}
	lease.set(takeLease(t, st, "r1"), true)
	h := fencedHarness(t, []config.ScriptStep{text("restarted the gateway")}, st, lease, log, out)
	h.a.Acquired(true)
	h.holdCalls()
	log.add(h.a, wakeMsg("payments down"))
	h.waitCall()
	takeLease(t, st, "r2") // while r1 is frozen
	h.release()
	f := h.waitEvent(events.TurnFailed)
	if f.Data["outcome"] != OutcomeAbandoned {
		t.Fatalf("turn ended %v (%v), want abandoned", f.Data["outcome"], f.Data["error"])
	}
	h.waitSettled(false)
	if n := h.count(events.TurnCompleted) + h.count(events.MessageHandled); n != 0 {
		t.Fatalf("%d completion or handled events for a turn whose lease moved", n)
	}
	if items, _ := st.Tail(context.Background(), "history."+AppName+".tester.tester", 0); len(items) != 0 {
		t.Fatalf("the turn's record landed under a moved lease: %d items", len(items))
	}
	if log.cursor("in") != 0 {
		t.Fatalf("cursor moved to %d under a moved lease", log.cursor("in"))
	}
	if s := h.a.Status(); s.InboxPending != 0 {
		t.Fatalf("the message was requeued here: %+v", s)
	}
	if o := out.String(); !strings.Contains(o, "turn abandoned: lease moved") || strings.Contains(o, "turn completed") {
		t.Fatalf("log does not say the turn was abandoned:\n%s", o)
	}
}

// recordingPublisher records what the publish tool sends.
type recordingPublisher struct{ n atomic.Int64 }

func (p *recordingPublisher) Publish(context.Context, string, []byte, string) error {
	p.n.Add(1)
	return nil
}

// A turn stops before its next tool call once its lease is in doubt here
// (a renewal overdue: the lease manager's fence turned false) — the
// process woke from a freeze between the model's answer and the call. The
// call is not made, and the turn is abandoned. On the old code the tool
// ran.
func TestATurnWhoseLeaseIsInDoubtMakesNoMoreToolCalls(t *testing.T) {
	t.Parallel()
	st := memstore.New(clock.NewFake(epoch))
	lease, log, out := &believedLease{}, newMemLog(), &syncbuf.Buffer{}
	lease.set(takeLease(t, st, "r1"), true)
	pub := &recordingPublisher{}
	script := []config.ScriptStep{call("publish", map[string]any{"subject": "ops.page", "text": "paging the on-call"}), text("paged")}
	h := newHarnessWith(t, script, func(d *Deps) {
		d.Store, d.Input, d.Leased, d.Publisher = st, log, true, pub
		d.Log = slog.New(slog.NewTextHandler(out, nil))
		d.Scheduler = scheduler.New(scheduler.Options{Store: st, Clock: d.Clock, Owner: lease})
	}, func(s *Spec) { s.Tools, s.Publish = append(s.Tools, "publish"), []string{"ops.>"} })
	h.a.Acquired(true)
	h.holdCalls()
	log.add(h.a, wakeMsg("payments down"))
	h.waitCall()
	lease.set(store.Fence{}, false) // woken from a freeze: the renewal is overdue
	h.release()
	f := h.waitEvent(events.TurnFailed)
	if f.Data["outcome"] != OutcomeAbandoned {
		t.Fatalf("turn ended %v (%v), want abandoned", f.Data["outcome"], f.Data["error"])
	}
	if n := pub.n.Load(); n != 0 {
		t.Fatalf("the publish tool ran %d times after the lease was in doubt", n)
	}
	if n := h.modelCalls(); n != 1 {
		t.Fatalf("%d model calls; want the one before the doubt", n)
	}
}

// The frozen replica of the issue (agent a184): r1's turn for m1 is held
// at the model while r2 takes the lease and handles m1 and m2; r1 wakes,
// its turn is abandoned; the lease comes back to r1, which must go on from
// r2's records (turn 3 next, m1 and m2 handled), never run m1 or m2 again. On
// the old code r1's stale record landed and it ran from its own state.
func TestARegainedAgentDoesNotRerunWhatTheOtherHolderHandled(t *testing.T) {
	t.Parallel()
	st := memstore.New(clock.NewFake(epoch))
	log := newMemLog()
	l1, l2 := &believedLease{}, &believedLease{}
	out1, out2 := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	r1 := fencedHarness(t, []config.ScriptStep{text("r1 on it")}, st, l1, log, out1)
	r2 := fencedHarness(t, []config.ScriptStep{text("r2 on it")}, st, l2, log, out2)
	l1.set(takeLease(t, st, "r1"), true)
	r1.a.Acquired(true)
	r1.holdCalls()
	m1 := log.add(r1.a, wakeMsg("first alert"))
	r1.waitCall() // r1 froze here

	l2.set(takeLease(t, st, "r2"), true)
	r2.a.Acquired(true) // reads m1 from the stored cursors
	r2.waitEvent(events.TurnCompleted)
	m2 := log.add(r2.a, wakeMsg("second alert"))
	wait.For(t, "r2 to handle m2", func() bool { return log.cursor("in") >= m2.Pos.Seq })
	r2.waitSettled(true)

	r1.release() // r1 thaws: its turn's record is refused
	if f := r1.waitEvent(events.TurnFailed); f.Data["outcome"] != OutcomeAbandoned {
		t.Fatalf("r1's stale turn ended %v, want abandoned", f.Data["outcome"])
	}
	r1.a.SetOwned(false) // its lease manager noticed
	l1.set(store.Fence{}, false)

	l2.set(store.Fence{}, false) // r2 hands it back (rendezvous)
	r2.a.SetOwned(false)
	l1.set(takeLease(t, st, "r1"), true)
	r1.a.Acquired(true)
	m3 := log.add(r1.a, wakeMsg("third alert"))
	e := r1.waitEvent(events.TurnCompleted)
	if ids := e.Data["ids"]; len(ids.([]string)) != 1 || ids.([]string)[0] != m3.ID {
		t.Fatalf("r1's first turn after the regain handled %v, want only %s (m1 %s and m2 %s were r2's)", ids, m3.ID, m1.ID, m2.ID)
	}
	if n := e.Data["turn"]; n != uint64(3) {
		t.Fatalf("r1's turn after the regain is numbered %v, want 3 (r2 ran 1 and 2)", n)
	}
}

// heldGets is a store whose reads of one key wait, while armed, until
// the test lets them go; it counts them.
type heldGets struct {
	store.Store
	key     string
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
	n       atomic.Int64
}

func (h *heldGets) Get(ctx context.Context, k string) (store.Entry, error) {
	if k == h.key {
		h.n.Add(1)
		if h.armed.Load() {
			h.entered <- struct{}{}
			<-h.release
		}
	}
	return h.Store.Get(ctx, k)
}

// A lease let go while the agent's restore was still under way, then
// taken back unmoved, is restored again: what the process held when it
// let go was not the store's truth yet (a restore that finishes after
// the let-go must not stand for one that read the cursors). On the code
// before this check the take-back kept empty cursors and read the log
// from its start.
func TestATakeBackAfterALetGoMidRestoreRestoresAgain(t *testing.T) {
	t.Parallel()
	base := memstore.New(clock.NewFake(epoch))
	st := &heldGets{Store: base, key: "agent.tester.paused", entered: make(chan struct{}), release: make(chan struct{})}
	lease, log, out := &believedLease{}, newMemLog(), &syncbuf.Buffer{}
	lease.set(takeLease(t, base, "r1"), true)
	h := fencedHarness(t, []config.ScriptStep{text("ok")}, st, lease, log, out)
	st.armed.Store(true)
	h.a.Acquired(true)
	<-st.entered // the restore reads the pause
	h.a.SetOwned(false)
	st.armed.Store(false)
	close(st.release)
	wait.For(t, "the restore under way to finish", func() bool { return h.a.Restored() })
	h.a.Acquired(false)
	wait.For(t, "a second restore", func() bool { return st.n.Load() >= 2 })
}
