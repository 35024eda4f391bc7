package driver

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/scheduler"
)

func TestDeferredDoesNotWakeButRidesAlong(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("ok")})
	h.a.Send(deferredMsg("background context: db-1 was migrated"))
	// Send is synchronous: had it woken the agent, a wake event and a
	// pending cause would exist now.
	if n := h.count(events.Wake); n != 0 {
		t.Fatalf("deferred message produced %d wake events", n)
	}
	if s := h.a.Status(); s.PendingWakes != 0 || s.Deferred != 1 || s.State != Sleeping {
		t.Fatalf("after deferred send: %+v", s)
	}
	h.a.Send(wakeMsg("disk full on db-1"))
	e := h.waitEvent(events.TurnCompleted)
	if e.Data["turn"] != uint64(1) {
		t.Fatalf("first completed turn is %v", e.Data["turn"])
	}
	p := h.prompt(1)
	if !strings.Contains(p, "db-1 was migrated") || !strings.Contains(p, "disk full on db-1") {
		t.Fatalf("turn 1 prompt lacks the deferred and wake messages:\n%s", p)
	}
	if strings.Index(p, "migrated") > strings.Index(p, "disk full") {
		t.Fatalf("messages not oldest first:\n%s", p)
	}
}

func TestMessagesDuringATurnCoalesceIntoOne(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("ok")})
	h.holdCalls()
	h.a.Send(wakeMsg("first"))
	h.waitCall() // turn 1 is inside its model call
	for i := 1; i <= 3; i++ {
		h.a.Send(wakeMsg(fmt.Sprintf("alert %d", i)))
	}
	h.release()
	h.waitEvent(events.TurnCompleted)
	e := h.waitEvent(events.TurnCompleted)
	if e.Data["turn"] != uint64(2) || e.Data["messages"] != 3 {
		t.Fatalf("second turn: %v", e.Data)
	}
	h.waitIdle()
	p := h.prompt(2)
	for i := 1; i <= 3; i++ {
		if !strings.Contains(p, fmt.Sprintf("alert %d", i)) {
			t.Fatalf("turn 2 prompt lacks alert %d:\n%s", i, p)
		}
	}
	if !strings.Contains(p, "inbox message ×3") {
		t.Fatalf("wake line does not coalesce the three wakes:\n%s", p)
	}
	if s := h.a.Status(); s.Turns != 2 {
		t.Fatalf("turns = %d, want 2 (three wakes became one turn)", s.Turns)
	}
}

func TestOverflowDropsOldestAndTellsNextTurn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("ok")}, func(s *Spec) { s.InboxCap = 3 })
	for i := 1; i <= 5; i++ {
		h.a.Send(deferredMsg(fmt.Sprintf("m%d", i)))
	}
	if n := h.count(events.MessageDropped); n != 2 {
		t.Fatalf("%d message-dropped events, want 2", n)
	}
	h.a.Wake(Cause{Source: SourceOperator})
	h.waitEvent(events.TurnCompleted)
	p := h.prompt(1)
	if !strings.Contains(p, "2 older message(s) were dropped") {
		t.Fatalf("prompt does not say how many were dropped:\n%s", p)
	}
	if strings.Contains(p, "m1\n") || strings.Contains(p, "m2\n") || !strings.Contains(p, "m3") || !strings.Contains(p, "m5") {
		t.Fatalf("prompt should hold m3..m5 only:\n%s", p)
	}
}

func TestPauseKeepsMessagesAndResumeRunsOneTurn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("ok")})
	h.a.Pause()
	for i := 1; i <= 3; i++ {
		h.a.Send(wakeMsg(fmt.Sprintf("queued %d", i)))
	}
	if s := h.a.Status(); s.State != Paused || s.InboxPending != 3 {
		t.Fatalf("paused agent: %+v", s)
	}
	if err := h.a.Resume("please handle the backlog"); err != nil {
		t.Fatal(err)
	}
	e := h.waitEvent(events.TurnCompleted)
	if e.Data["turn"] != uint64(1) || e.Data["messages"] != 3 {
		t.Fatalf("resume turn: %v (a turn ran while paused?)", e.Data)
	}
	h.waitIdle()
	if s := h.a.Status(); s.Turns != 1 {
		t.Fatalf("turns = %d, want 1", s.Turns)
	}
	p := h.prompt(1)
	if !strings.Contains(p, "Message from the operator:\nplease handle the backlog") {
		t.Fatalf("operator message missing:\n%s", p)
	}
	if strings.Index(p, "backlog") > strings.Index(p, "EXTERNAL MESSAGES") {
		t.Fatalf("operator message rendered as external data:\n%s", p)
	}
}

func TestInterruptAndHold(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("ok")})
	h.holdCalls()
	h.a.Send(wakeMsg("long job"))
	h.waitCall()
	if !h.a.Interrupt(true) {
		t.Fatal("Interrupt reported no running turn")
	}
	f := h.waitEvent(events.TurnFailed)
	if f.Data["outcome"] != OutcomeInterrupted {
		t.Fatalf("interrupted turn outcome = %v", f.Data["outcome"])
	}
	h.release()
	h.a.Send(wakeMsg("new alert"))
	h.a.Wake(Cause{Source: SourceOperator})
	if s := h.a.Status(); s.State != Paused || s.InboxPending != 2 {
		t.Fatalf("after interrupt-and-hold: %+v", s)
	}
	resumed := len(h.seen)
	if err := h.a.Resume(""); err != nil {
		t.Fatal(err)
	}
	e := h.waitEvent(events.TurnCompleted)
	if e.Data["turn"] != uint64(2) || e.Data["messages"] != 2 {
		t.Fatalf("turn after resume: %v", e.Data)
	}
	for _, ev := range h.seen[:resumed] {
		if ev.Type == events.TurnStarted && ev.Data["turn"] == uint64(2) {
			t.Fatal("turn 2 started before resume")
		}
	}
	p := h.prompt(2)
	if !strings.Contains(p, "long job") || !strings.Contains(p, "new alert") {
		t.Fatalf("resume turn lacks the interrupted and the new message:\n%s", p)
	}
}

func TestScheduleNextTurnClampsAndSaysSo(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{
		call("schedule_next_turn", map[string]any{"wake_in_seconds": 1}),
		text("see you later"),
	}, func(s *Spec) { s.Sleep.Min = 30 * time.Second })
	h.a.Send(wakeMsg("check back soon"))
	h.waitEvent(events.TurnCompleted)
	h.mu.Lock()
	req := h.requests[1]
	h.mu.Unlock()
	last := req.Contents[len(req.Contents)-1]
	fr := last.Parts[0].FunctionResponse
	if fr == nil || fr.Name != "schedule_next_turn" {
		t.Fatalf("second call does not carry the tool result: %+v", last)
	}
	if fr.Response["clamped"] != true || !strings.Contains(fmt.Sprint(fr.Response["note"]), "minimum sleep of 30s") {
		t.Fatalf("model was not told about the clamp: %v", fr.Response)
	}
	s := h.a.Status()
	if s.NextWake == nil || !s.NextWake.Equal(epoch.Add(30*time.Second)) || s.NextWakeCause != "timer" {
		t.Fatalf("next wake = %v (%s), want %v", s.NextWake, s.NextWakeCause, epoch.Add(30*time.Second))
	}
	h.clock.Advance(30 * time.Second)
	h.waitEvent(events.TurnStarted)
	h.waitEvent(events.TurnCompleted)
	if p := h.prompt(3); !strings.Contains(p, "[wake: timer you requested (due 2026-11-29T08:00:30Z)]") {
		t.Fatalf("timer turn prompt:\n%s", p)
	}
}

func TestTurnWithoutWakeRequestDoesNotRerun(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("done")})
	h.a.Send(wakeMsg("one thing"))
	h.waitEvent(events.TurnCompleted)
	h.waitIdle()
	if s := h.a.Status(); s.NextWake != nil {
		t.Fatalf("a wake was armed without a request: %v", s.NextWake)
	}
	if n := h.clock.Timers(); n != 0 {
		t.Fatalf("%d timers armed after a turn that asked for none", n)
	}
	h.clock.Advance(48 * time.Hour)
	h.waitIdle()
	if s := h.a.Status(); s.Turns != 1 {
		t.Fatalf("turns = %d after 48h of silence, want 1", s.Turns)
	}
}

func TestHeartbeatWakesWhenNoRequest(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("done")}, func(s *Spec) { s.Heartbeat = time.Hour })
	h.a.Send(wakeMsg("one thing"))
	h.waitEvent(events.TurnCompleted)
	h.waitIdle()
	s := h.a.Status()
	if s.NextWake == nil || !s.NextWake.Equal(epoch.Add(time.Hour)) || s.NextWakeCause != "heartbeat" {
		t.Fatalf("next wake = %v %q, want heartbeat at +1h", s.NextWake, s.NextWakeCause)
	}
	h.clock.Advance(time.Hour)
	h.waitEvent(events.TurnCompleted)
	if p := h.prompt(2); !strings.Contains(p, "[wake: heartbeat") {
		t.Fatalf("heartbeat prompt:\n%s", p)
	}
}

func TestTurnTimeoutCancelsHungModelCall(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{{Hang: true}, text("recovered")},
		func(s *Spec) { s.TurnTimeout = time.Minute })
	h.a.Send(wakeMsg("hello"))
	h.waitCall() // the timeout timer is armed before the model is called
	h.clock.Advance(time.Minute)
	f := h.waitEvent(events.TurnFailed)
	if f.Data["outcome"] != OutcomeTimeout {
		t.Fatalf("outcome = %v, want timeout (%v)", f.Data["outcome"], f.Data["error"])
	}
	if s := h.a.Status(); s.InboxPending != 1 {
		t.Fatalf("message of the timed-out turn not requeued: %+v", s)
	}
}

func TestFailedTurnRequeuesThenGivesUp(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{{Error: "the model rejected the request"}})
	h.a.Send(wakeMsg("retry me"))
	for i := 1; i <= MaxAttempts; i++ {
		h.waitEvent(events.TurnFailed)
		h.waitSettled(false)
		if i < MaxAttempts {
			if s := h.a.Status(); s.InboxPending != 1 || s.NextWakeCause != string(SourceRetry) {
				t.Fatalf("after failure %d: %+v", i, s)
			}
			h.clock.Advance(DefaultRetryMax) // the retry comes by itself
		}
	}
	h.waitIdle()
	if s := h.a.Status(); s.NextWake != nil || s.InboxPending != 0 {
		t.Fatalf("a retry is armed although the message was given up: %+v", s)
	}
	if n := h.count(events.MessageDropped); n != 1 {
		t.Fatalf("%d message-dropped events after %d failures, want 1", n, MaxAttempts)
	}
	for _, e := range h.seen {
		if e.Type == events.MessageDropped && !strings.Contains(fmt.Sprint(e.Data["reason"]), "failed") {
			t.Fatalf("drop reason = %v", e.Data["reason"])
		}
	}
	if p := h.prompt(2); !strings.Contains(p, "retry 1") {
		t.Fatalf("retried message not marked:\n%s", p)
	}
}

func TestShutdownLetsRunningTurnFinish(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("finished")})
	h.holdCalls()
	h.a.Send(wakeMsg("work"))
	h.waitCall()
	h.a.Send(wakeMsg("arrives during the turn"))
	done := make(chan struct{})
	go func() { h.d.Shutdown(context.Background()); close(done) }()
	h.waitEvent(events.Stopping)
	h.release()
	select {
	case <-done:
	case <-time.After(deadline):
		t.Fatal("Shutdown did not return")
	}
	e := h.waitEvent(events.TurnCompleted)
	if e.Data["turn"] != uint64(1) {
		t.Fatalf("completed %v", e.Data)
	}
	if s := h.a.Status(); s.State != Stopped || s.Turns != 1 {
		t.Fatalf("after shutdown: %+v (no new turn may start)", s)
	}
}

func TestShutdownCancelsTurnAfterGrace(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{{Hang: true}})
	h.a.Send(wakeMsg("work"))
	h.waitCall()
	grace, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.d.Shutdown(grace); close(done) }()
	cancel() // the grace period is over
	select {
	case <-done:
	case <-time.After(deadline):
		t.Fatal("Shutdown did not return after grace")
	}
	f := h.waitEvent(events.TurnFailed)
	if f.Data["outcome"] != OutcomeShutdown {
		t.Fatalf("outcome = %v, want shutdown", f.Data["outcome"])
	}
}

func TestBackToBackTurnsAreThrottled(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("ok")}, func(s *Spec) { s.MaxTurnsPerWake = 2 })
	h.holdCalls()
	h.a.Send(wakeMsg("1"))
	h.waitCall()
	h.a.Send(wakeMsg("2"))
	h.step()
	h.waitCall()           // turn 2 runs back to back
	h.a.Send(wakeMsg("3")) // lands during turn 2
	h.release()
	th := h.waitEvent(events.Throttled)
	if th.Data["turns"] != 2 {
		t.Fatalf("throttled: %v", th.Data)
	}
	h.waitSettled(false)
	if s := h.a.Status(); s.Turns != 2 || s.PendingWakes != 1 {
		t.Fatalf("a third turn ran without a pause: %+v", s)
	}
	h.clock.Advance(time.Second)
	if e := h.waitEvent(events.TurnCompleted); e.Data["turn"] != uint64(3) {
		t.Fatalf("after the pause: %v", e.Data)
	}
	if p := h.prompt(3); !strings.Contains(p, "back to back") {
		t.Fatalf("throttled turn not told:\n%s", p)
	}
}

func TestReportDoneEmitsEvent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{
		call("report_done", map[string]any{"summary": "capacity report written"}),
		text("done"),
	})
	h.a.Send(wakeMsg("write the report"))
	e := h.waitEvent(events.ReportDone)
	if e.Data["summary"] != "capacity report written" {
		t.Fatalf("report-done: %v", e.Data)
	}
	c := h.waitEvent(events.TurnCompleted)
	if c.Data["tool_calls"] != 1 || c.Data["model_calls"] != 2 || c.Data["tokens_in"] != 200 {
		t.Fatalf("turn summary: %v", c.Data)
	}
}

func TestCoalesceWindowGathersABurst(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("ok")}, func(s *Spec) { s.Coalesce = 2 * time.Second })
	armed := h.clock.Armed()
	h.a.Send(wakeMsg("alert 1"))
	<-armed // the coalesce timer
	h.clock.Advance(time.Second)
	h.a.Send(wakeMsg("alert 2"))
	if s := h.a.Status(); s.Turns != 0 {
		t.Fatalf("a turn started inside the coalesce window: %+v", s)
	}
	h.clock.Advance(time.Second)
	e := h.waitEvent(events.TurnCompleted)
	if e.Data["messages"] != 2 {
		t.Fatalf("turn after the window: %v", e.Data)
	}
}

func TestScheduleFireIsAWakeWithItsPrompt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("report written")}, func(s *Spec) {
		s.Schedules = []scheduler.Schedule{{Name: "morning", Cron: "0 9 * * *", Timezone: "UTC", Prompt: "Write the capacity report.", Enabled: true}}
	})
	h.clock.Advance(time.Hour) // 09:00
	h.waitEvent(events.TurnCompleted)
	p := h.prompt(1)
	for _, want := range []string{`[wake: schedule "morning" (due 2026-11-29T09:00:00Z)]`, "Scheduled task \"morning\" (due 2026-11-29T09:00:00Z):\nWrite the capacity report."} {
		if !strings.Contains(p, want) {
			t.Fatalf("prompt lacks %q:\n%s", want, p)
		}
	}
}
