package driver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/adk/model"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/models/scripted"
	"github.com/agent-worker/agent-worker/scheduler"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// ownsNothing is a replica that holds no lease.
type ownsNothing struct{}

func (ownsNothing) Owns(string) bool { return false }

func (ownsNothing) Fence(string) (store.Fence, bool) { return store.Fence{}, false }

// replicaOn builds a driver over st, as one replica sharing st. leased:
// its agent starts in standby; owner: the scheduler's Owner (nil: owns).
func replicaOn(t *testing.T, st store.Store, c *clock.Fake, leased bool, owner scheduler.Owner) *Agent {
	t.Helper()
	m, err := scripted.New("fake", config.Model{Script: []config.ScriptStep{text("ok")}, Loop: true})
	if err != nil {
		t.Fatal(err)
	}
	return replicaWith(t, st, c, leased, owner, m)
}

// replicaWith is replicaOn with the agent's model m.
func replicaWith(t *testing.T, st store.Store, c *clock.Fake, leased bool, owner scheduler.Owner, m model.LLM) *Agent {
	t.Helper()
	sched := scheduler.New(scheduler.Options{Store: st, Clock: c, Owner: owner})
	d, err := New(Deps{Clock: c, Store: st, Scheduler: sched, Leased: leased}, []Spec{{Name: "tester", Model: m, HistoryTurns: 5}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Shutdown(context.Background()) })
	a, _ := d.Agent("tester")
	return a
}

// TestOnlyTheOwnerWritesThePause: a replica that does not own the agent
// — standing by, or not holding its lease by the scheduler's Owner — never
// writes its pause: resume, pause and interrupt there leave the owner's
// stored pause as it is, and persist says why.
func TestOnlyTheOwnerWritesThePause(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(epoch)
	st := memstore.New(c)
	ctx := context.Background()
	owner := replicaOn(t, st, c, true, nil)
	owner.SetOwned(true)
	wait.For(t, "the owner restored", func() bool { return !owner.needsRestore() })
	owner.Pause()
	before, err := st.Get(ctx, "agent.tester.paused")
	if err != nil {
		t.Fatal(err)
	}

	standby := replicaOn(t, st, c, true, nil)
	if err := standby.Resume("go"); err != nil {
		t.Fatal(err)
	}
	standby.Interrupt(true)
	if err := standby.persist("paused", "", nil); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("standby persist: %v", err)
	}
	// Not standing by, but the lease is not held here either.
	unleased := replicaOn(t, st, c, false, ownsNothing{})
	if err := unleased.Resume(""); err != nil {
		t.Fatal(err)
	}
	after, err := st.Get(ctx, "agent.tester.paused")
	if err != nil || after.Revision != before.Revision {
		t.Fatalf("a replica that does not own the agent wrote its pause: %+v, %v", after, err)
	}
	// The owner still writes.
	if err := owner.Resume(""); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, "agent.tester.paused"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the owner's resume was not stored: %v", err)
	}
}

// switchOwner is a lease the test takes away.
type switchOwner struct{ lost atomic.Bool }

func (s *switchOwner) Owns(string) bool { return !s.lost.Load() }

func (s *switchOwner) Fence(string) (store.Fence, bool) { return store.Fence{}, !s.lost.Load() }

// TestATurnEndingAfterItsLeaseWentRecordsNothing: the lease goes while
// the model answers (the lease manager no longer holds it; the driver has
// not heard yet). The turn that ends then does not write its record over
// the new owner's history: it ends as a lost lease and its messages go
// back. On the old code the deposed replica committed the turn.
func TestATurnEndingAfterItsLeaseWentRecordsNothing(t *testing.T) {
	t.Parallel()
	lease := &switchOwner{}
	h := newHarnessWith(t, []config.ScriptStep{text("noted")}, func(d *Deps) {
		d.Scheduler = scheduler.New(scheduler.Options{Store: d.Store, Clock: d.Clock, Owner: lease})
	})
	h.holdCalls()
	h.a.Send(wakeMsg("disk full on db-1"))
	h.waitCall()
	lease.lost.Store(true)
	h.release()
	e := h.waitEvent(events.TurnFailed)
	if !strings.Contains(fmt.Sprint(e.Data["error"]), ErrLeaseLost.Error()) {
		t.Errorf("turn failed with %v, want the lease lost", e.Data)
	}
	recent, err := h.a.hist.Recent(context.Background(), AppName, "tester", "tester")
	if err != nil {
		t.Fatal(err)
	}
	if len(recent) != 0 {
		t.Fatalf("a replica without the lease recorded %d turns", len(recent))
	}
}
