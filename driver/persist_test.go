package driver

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/models/scripted"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memory"
)

// restart builds a second driver over st, as a restarted worker would.
func restart(t *testing.T, st store.Store, c *clock.Fake) (*Agent, *events.Subscription) {
	t.Helper()
	m, err := scripted.New("fake", config.Model{Script: []config.ScriptStep{text("ok")}, Loop: true})
	if err != nil {
		t.Fatal(err)
	}
	bus := events.NewBus(0, nil)
	sub := bus.Subscribe(100, nil)
	d, err := New(Deps{Clock: c, Store: st, Events: bus}, []Spec{{Name: "tester", Model: m, Tools: []string{"schedule_next_turn"}}})
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

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-time.After(time.Millisecond)
	}
}

func TestPauseSurvivesRestart(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(epoch)
	st := memory.New(c)
	a, _ := restart(t, st, c)
	a.Pause()
	b, sub := restart(t, st, c)
	waitFor(t, "restored pause", func() bool { return b.State() == Paused })
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
	waitFor(t, "restore", func() bool { c2.mu.Lock(); defer c2.mu.Unlock(); return c2.restored })
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
	waitFor(t, "restored wake", func() bool { s := b.Status(); return s.NextWake != nil && s.NextWake.Equal(want) })
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
	mem := memory.New(c)
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
	waitFor(t, "restore after retries", func() bool { return a.State() == Paused })
}

func waitArmed(t *testing.T, armed <-chan struct{}) {
	t.Helper()
	select {
	case <-armed:
	case <-time.After(deadline):
		t.Fatal("no timer armed")
	}
}
