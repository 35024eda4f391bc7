package driver

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/outage"
	"github.com/agent-worker/agent-worker/scheduler"
	"github.com/agent-worker/agent-worker/store"
)

// providerDown is what a provider's client returns once its own retries
// are spent on 5xx answers.
var providerDown = outage.Mark("model provider", errors.New("openai: 503 Service Unavailable (gave up after 4 attempts)"))

func TestFailedTurnIsRetriedByItselfWithBackoff(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{{Error: "the model answered nonsense"}, text("handled")},
		func(s *Spec) { s.Retry = Backoff{Base: 2 * time.Second, Max: 5 * time.Minute} })
	start := h.clock.Now()
	h.a.Send(wakeMsg("disk full on db-1"))
	r := h.waitEvent(events.RetryScheduled) // the next wake is set before the failure is announced
	h.waitEvent(events.TurnFailed)
	h.waitSettled(false)
	s := h.a.Status()
	if s.NextWake == nil || s.NextWakeCause != "retry" || s.NextWakeReason != "retry after failure" || s.FailedTurns != 1 {
		t.Fatalf("status after a failed turn: %+v", s)
	}
	if d := s.NextWake.Sub(start); d < time.Second || d > 2*time.Second {
		t.Fatalf("first retry in %v, want within [1s, 2s]", d)
	}
	if r.Data["reason"] != "failure" {
		t.Fatalf("retry-scheduled: %v", r.Data)
	}
	h.clock.Set(s.NextWake.Add(-time.Millisecond))
	h.waitSettled(false)
	if n := h.modelCalls(); n != 1 {
		t.Fatalf("retried before its backoff ended: %d calls", n)
	}
	h.clock.Set(*s.NextWake) // nothing else wakes the agent
	h.waitEvent(events.TurnCompleted)
	p := h.prompt(2)
	for _, want := range []string{"retry after a failed turn", "disk full on db-1", "retry 1"} {
		if !strings.Contains(p, want) {
			t.Fatalf("retried prompt lacks %q:\n%s", want, p)
		}
	}
	h.waitIdle()
	if s := h.a.Status(); s.NextWake != nil || s.FailedTurns != 0 {
		t.Fatalf("after the retry succeeded: %+v", s)
	}
}

func TestRetryBackoffGrowsToItsMax(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("handled")},
		func(s *Spec) { s.Retry = Backoff{Base: 2 * time.Second, Max: 10 * time.Second} })
	h.failCalls(providerDown, providerDown, providerDown, providerDown, providerDown)
	h.a.Send(wakeMsg("page the on-call"))
	for i, ceiling := range []time.Duration{2, 4, 8, 10, 10} {
		ceiling *= time.Second
		h.waitEvent(events.TurnFailed)
		h.waitSettled(false)
		s := h.a.Status()
		if s.NextWake == nil || s.NextWakeCause != "retry" {
			t.Fatalf("failure %d: no retry armed: %+v", i+1, s)
		}
		if d := s.NextWake.Sub(h.clock.Now()); d < ceiling/2 || d > ceiling {
			t.Fatalf("failure %d: retry in %v, want within [%v, %v]", i+1, d, ceiling/2, ceiling)
		}
		h.clock.Set(*s.NextWake)
	}
	e := h.waitEvent(events.TurnCompleted)
	if e.Data["messages"] != 1 {
		t.Fatalf("the message did not survive five provider failures: %v", e.Data)
	}
	if n := h.count(events.MessageDropped); n != 0 {
		t.Fatalf("%d messages dropped because the provider was down", n)
	}
}

func TestFailedScheduledTurnKeepsItsTask(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{{Error: "the model answered nonsense"}, text("report written")}, func(s *Spec) {
		s.Schedules = []scheduler.Schedule{{Name: "morning", Cron: "0 9 * * *", Timezone: "UTC", Prompt: "Write the capacity report.", Enabled: true}}
	})
	h.clock.Advance(time.Hour) // 09:00: the tick fires and its turn fails
	h.waitEvent(events.TurnFailed)
	h.waitSettled(false)
	h.clock.Advance(DefaultRetryBase)
	h.waitEvent(events.TurnCompleted)
	p := h.prompt(2)
	if !strings.Contains(p, "Scheduled task \"morning\" (due 2026-11-29T09:00:00Z):\nWrite the capacity report.") {
		t.Fatalf("the retried turn lost the schedule's task:\n%s", p)
	}
}

func TestTaskIsGivenUpAfterFailingTooManyTurns(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{{Error: "the model answered nonsense"}})
	h.a.Fire(scheduler.Fire{Kind: scheduler.KindSchedule, Schedule: "morning", Due: h.clock.Now(), Prompt: "Write the capacity report."})
	for i := 1; i <= MaxAttempts; i++ {
		h.waitEvent(events.TurnFailed)
		h.waitSettled(false)
		if i < MaxAttempts {
			h.clock.Advance(DefaultRetryMax)
		}
	}
	h.waitIdle()
	if n := h.count(events.WakeDropped); n != 1 {
		t.Fatalf("%d wake-dropped events, want 1", n)
	}
	for _, e := range h.seen {
		if e.Type == events.WakeDropped && (e.Data["source"] != "schedule" || e.Data["name"] != "morning") {
			t.Fatalf("wake-dropped: %v", e.Data)
		}
	}
	if s := h.a.Status(); s.NextWake != nil {
		t.Fatalf("a retry is armed for a task given up: %+v", s)
	}
}

func TestResumeMessageSurvivesAFailedTurn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("done")})
	h.a.Pause()
	h.failCalls(providerDown)
	if err := h.a.Resume("check db-1 before anything else"); err != nil {
		t.Fatal(err)
	}
	h.waitEvent(events.TurnFailed)
	h.waitSettled(false)
	h.clock.Advance(DefaultRetryBase)
	h.waitEvent(events.TurnCompleted)
	if p := h.prompt(2); !strings.Contains(p, "Message from the operator:\ncheck db-1 before anything else") {
		t.Fatalf("the retried turn lost the operator's message:\n%s", p)
	}
}

// flakyStore fails writes of history records while down is set.
type flakyStore struct {
	store.Store
	down atomic.Bool
}

var errStoreDown = errors.New("redis: connection refused")

func (s *flakyStore) Append(ctx context.Context, list string, v []byte, keep int) error {
	if s.down.Load() {
		return errStoreDown
	}
	return s.Store.Append(ctx, list, v, keep)
}

func TestStoreOutageIsNotTheMessagesFault(t *testing.T) {
	t.Parallel()
	var fs *flakyStore
	h := newHarnessWith(t, []config.ScriptStep{text("noted")}, func(d *Deps) {
		fs = &flakyStore{Store: d.Store}
		d.Store = fs
	})
	fs.down.Store(true)
	h.a.Send(wakeMsg("alert: payments latency"))
	for i := 1; i <= MaxAttempts+1; i++ {
		f := h.waitEvent(events.TurnFailed)
		if f.Data["outcome"] != OutcomeUnavailable {
			t.Fatalf("turn %d: outcome %v (%v), want unavailable", i, f.Data["outcome"], f.Data["error"])
		}
		h.waitSettled(false)
		if s := h.a.Status(); s.InboxPending != 1 {
			t.Fatalf("after %d failed records the message is gone: %+v", i, s)
		}
		h.clock.Advance(DefaultRetryMax)
	}
	fs.down.Store(false)
	h.clock.Advance(DefaultRetryMax)
	if e := h.waitEvent(events.TurnCompleted); e.Data["messages"] != 1 {
		t.Fatalf("completed: %v", e.Data)
	}
	if n := h.count(events.MessageDropped); n != 0 {
		t.Fatalf("%d messages dropped because the store was down", n)
	}
}

// switchHealth is a Health whose answer the test sets.
type switchHealth struct {
	down   atomic.Pointer[error]
	failed atomic.Int32
}

func (s *switchHealth) Unavailable() error {
	if p := s.down.Load(); p != nil {
		return *p
	}
	return nil
}
func (s *switchHealth) Failed(error) { s.failed.Add(1) }

func TestOutageHoldsTurnsWithoutModelCalls(t *testing.T) {
	t.Parallel()
	hl := &switchHealth{}
	h := newHarnessWith(t, []config.ScriptStep{text("noted")}, func(d *Deps) { d.Health = hl })
	down := outage.Mark("store", errors.New("store: probe did not answer in time"))
	hl.down.Store(&down)
	h.a.Send(wakeMsg("alert: disk full"))
	h.waitEvent(events.Waiting)
	h.waitSettled(false)
	s := h.a.Status()
	if s.State != Waiting || !strings.Contains(s.WaitingFor, "store") || s.InboxPending != 1 {
		t.Fatalf("status during the outage: %+v", s)
	}
	h.clock.Advance(time.Minute) // re-checks find it still down
	h.waitSettled(false)
	if n := h.modelCalls(); n != 0 {
		t.Fatalf("%d model calls while the store was down", n)
	}
	hl.down.Store(nil)
	h.d.Recovered()
	h.waitEvent(events.WaitingOver)
	if e := h.waitEvent(events.TurnCompleted); e.Data["messages"] != 1 {
		t.Fatalf("completed: %v", e.Data)
	}
	if s := h.a.Status(); s.State == Waiting || s.WaitingFor != "" {
		t.Fatalf("still waiting after recovery: %+v", s)
	}
}

func TestRecoveryEndsAnOutageRetryEarly(t *testing.T) {
	t.Parallel()
	hl := &switchHealth{}
	h := newHarnessWith(t, []config.ScriptStep{text("noted")}, func(d *Deps) { d.Health = hl },
		func(s *Spec) { s.Retry = Backoff{Base: time.Hour, Max: time.Hour} })
	h.failCalls(outage.Mark("store", errStoreDown))
	h.a.Send(wakeMsg("alert"))
	h.waitEvent(events.TurnFailed)
	h.waitSettled(false)
	if hl.failed.Load() != 1 {
		t.Fatal("the outage was not reported to the health monitor")
	}
	if s := h.a.Status(); s.NextWake == nil || s.NextWakeCause != "retry" {
		t.Fatalf("no retry armed: %+v", s)
	}
	h.d.Recovered() // long before the hour is up
	h.waitEvent(events.TurnCompleted)
}

func TestOperatorWakeSkipsTheBackoff(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("noted")},
		func(s *Spec) { s.Retry = Backoff{Base: time.Hour, Max: time.Hour} })
	h.failCalls(providerDown)
	h.a.Send(wakeMsg("alert"))
	h.waitEvent(events.TurnFailed)
	h.waitSettled(false)
	h.a.Wake(Cause{Source: SourceOperator})
	h.waitEvent(events.TurnCompleted)
}

func TestSelfReschedulingAgentIsRateLimited(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{call("schedule_next_turn", map[string]any{"wake_in_seconds": 0}), text("again soon")}, func(s *Spec) {
		s.Sleep.Min = 10 * time.Second
		s.TurnsPerHour, s.TurnBurst = 60, 3
	})
	h.a.Wake(Cause{Source: SourceStartup})
	for turn := 1; turn <= 3; turn++ {
		h.waitEvent(events.TurnCompleted)
		h.waitSettled(true)
		h.clock.Advance(10 * time.Second) // the clamped wake the model asked for
	}
	th := h.waitEvent(events.Throttled)
	if th.Data["reason"] != "turns_per_hour" || th.Data["turns"] != 60 {
		t.Fatalf("throttled: %v", th.Data)
	}
	h.waitSettled(false)
	s := h.a.Status()
	if s.Turns != 3 || s.ThrottledUntil == nil || s.ThrottledBy != "turns_per_hour" || s.TurnsPerHour != 60 {
		t.Fatalf("status while throttled: %+v", s)
	}
	// Three turns in 30s spent the burst; half a token came back, so the
	// next one is due 30s later.
	if want := h.clock.Now().Add(30 * time.Second); !s.ThrottledUntil.Equal(want) {
		t.Fatalf("throttled until %v, want %v", s.ThrottledUntil, want)
	}
	h.clock.Set(s.ThrottledUntil.Add(-time.Millisecond))
	h.waitSettled(false)
	if s := h.a.Status(); s.Turns != 3 {
		t.Fatalf("a turn ran before the limit allowed it: %+v", s)
	}
	h.clock.Set(*s.ThrottledUntil)
	h.waitEvent(events.TurnCompleted)
	if p := h.prompt(7); !strings.Contains(p, "the worker allows you 60 turns an hour") {
		t.Fatalf("the throttled turn was not told:\n%s", p)
	}
}

func TestLeaseLostWhileRecordingLetsTheMessagesGo(t *testing.T) {
	t.Parallel()
	h, hh, log := recordingHeld(t)
	<-hh.entered // the model answered; the record is being written
	// The store is gone long enough to cost the lease; whichever replica
	// owns the agent next reads the message from the log.
	h.a.SetOwned(false)
	hh.answer <- errStoreDown
	f := h.waitEvent(events.TurnFailed)
	if f.Data["outcome"] != OutcomeAbandoned {
		t.Fatalf("outcome %v (%v), want abandoned: the lease was lost", f.Data["outcome"], f.Data["error"])
	}
	h.waitSettled(false)
	if s := h.a.Status(); s.InboxPending != 0 {
		t.Fatalf("a message released with the lease was requeued here too: %+v", s)
	}
	if log.cursor("in") != 0 || len(log.deadLetters()) != 0 {
		t.Fatalf("cursor %d, dead letters %v; want neither (the next owner reads it)", log.cursor("in"), log.deadLetters())
	}
}

// holdHistory holds each write of a turn record until the test answers
// it; other writes pass.
type holdHistory struct {
	store.Store
	entered chan struct{}
	answer  chan error
}

func (s *holdHistory) Append(ctx context.Context, list string, v []byte, keep int) error {
	if !strings.HasPrefix(list, "history.") {
		return s.Store.Append(ctx, list, v, keep)
	}
	s.entered <- struct{}{}
	if err := <-s.answer; err != nil {
		return err
	}
	return s.Store.Append(ctx, list, v, keep)
}

// recordingHeld starts an agent on a log holding message m-1, whose turn
// records wait for the test's answer.
func recordingHeld(t *testing.T) (*harness, *holdHistory, *memLog) {
	t.Helper()
	hh := &holdHistory{entered: make(chan struct{}, 1), answer: make(chan error, 1)}
	log := newMemLog()
	h := newHarnessWith(t, []config.ScriptStep{text("noted")}, func(d *Deps) {
		hh.Store = d.Store
		d.Store = hh
		d.Input = log
	})
	m := wakeMsg("alert")
	m.ID = "m-1"
	log.add(h.a, m)
	return h, hh, log
}

// The lease lost and taken back while a turn is being recorded (a store
// outage shorter than a renewal round) and then the record failing: the
// turn's messages are not put back in the inbox, since the agent, owned
// again, reads them from the log on from its cursors. Requeued as well,
// a message was twice in the next turn (a soak found "ids": ["m", "m"]).
func TestLeaseLostAndTakenBackWhileRecordingReadsTheMessageOnce(t *testing.T) {
	t.Parallel()
	h, hh, _ := recordingHeld(t)
	entered := func(what string) {
		t.Helper()
		select {
		case <-hh.entered:
		case <-time.After(deadline):
			t.Fatalf("no record written for %s; saw %v", what, types(h.seen))
		}
	}
	entered("the first turn") // the model answered; the record is being written
	h.a.SetOwned(false)
	h.a.SetOwned(true)
	hh.answer <- errStoreDown
	h.waitEvent(events.TurnFailed)
	h.clock.Advance(time.Minute) // the retry's backoff
	entered("the next turn")
	hh.answer <- nil
	done := h.waitEvent(events.TurnCompleted)
	if n, _ := done.Data["messages"].(int); n != 1 {
		t.Fatalf("the next turn handled %v message(s) (ids %v); want m-1 once", done.Data["messages"], done.Data["ids"])
	}
}
