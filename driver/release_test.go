package driver

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
)

// waitGate polls until the agent's gate says want.
func (h *harness) waitGate(want string) {
	h.t.Helper()
	end := time.Now().Add(deadline)
	for h.a.Gate() != want {
		if time.Now().After(end) {
			h.t.Fatalf("gate %q, want %q", h.a.Gate(), want)
		}
		<-time.After(time.Millisecond)
	}
}

// Release, for a handover, never cancels the running turn: it waits for
// it to finish and admits no other; handing over afterwards (SetOwned
// false) cancels nothing.
func TestReleaseLetsTheRunningTurnFinishAndStartsNoOther(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("noted")})
	h.holdCalls()
	h.a.Send(wakeMsg("first"))
	h.waitCall()
	released := make(chan error, 1)
	go func() { released <- h.a.Release(context.Background()) }()
	h.waitGate("standby") // the scheduler leaves timers and ticks to the next owner
	h.a.Send(wakeMsg("second, for the next owner"))
	select {
	case err := <-released:
		t.Fatalf("Release returned (%v) while the turn ran", err)
	default:
	}
	h.release()
	if err := <-released; err != nil {
		t.Fatalf("Release: %v", err)
	}
	h.waitEvent(events.TurnCompleted)
	h.waitSettled(false)
	if n := h.modelCalls(); n != 1 {
		t.Fatalf("%d model calls: a turn started while releasing", n)
	}
	h.a.SetOwned(false)
	h.waitSettled(false)
	if n := h.count(events.TurnFailed); n != 0 {
		t.Fatalf("%d turns failed: a handover must cancel nothing", n)
	}
	if s := h.a.Status(); !s.Standby || s.InboxPending != 0 {
		t.Fatalf("after the handover: %+v", s)
	}
}

// A handover called off while the turn runs (ctx ends) opens the gate
// again: the waiting work runs here.
func TestReleaseCalledOffOpensTheGateAgain(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("noted")})
	h.holdCalls()
	h.a.Send(wakeMsg("first"))
	h.waitCall()
	ctx, cancel := context.WithCancel(context.Background())
	released := make(chan error, 1)
	go func() { released <- h.a.Release(ctx) }()
	h.waitGate("standby")
	h.a.Send(wakeMsg("second"))
	cancel()
	if err := <-released; !errors.Is(err, context.Canceled) {
		t.Fatalf("Release: %v, want context.Canceled", err)
	}
	h.waitGate("")
	h.release()
	h.waitEvent(events.TurnCompleted)
	h.waitEvent(events.TurnCompleted) // the second message's turn, here
	if n := h.count(events.TurnFailed); n != 0 {
		t.Fatalf("%d turns failed", n)
	}
}

// After a Release that completed, SetOwned(true) (the handover was called
// off once drained) opens the gate again.
func TestSetOwnedEndsARelease(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("noted")})
	if err := h.a.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.a.Send(wakeMsg("waits"))
	h.waitSettled(false)
	if s := h.a.Status(); s.PendingWakes == 0 || h.modelCalls() != 0 {
		t.Fatalf("a turn ran behind a closed gate: %+v, %d calls", s, h.modelCalls())
	}
	h.a.SetOwner("r2")
	if o := h.a.Status().Owner; o != "r2" {
		t.Fatalf("owner %q", o)
	}
	h.a.SetOwned(true)
	h.waitEvent(events.TurnCompleted)
}

// A standby agent does not read its log, whatever news the router
// brings: the owner reads it. When the agent is owned here again it reads
// from its cursors: what arrived meanwhile, once.
func TestAStandbyAgentReadsNothingFromItsLog(t *testing.T) {
	t.Parallel()
	log := newMemLog()
	h := newHarnessWith(t, []config.ScriptStep{text("noted")}, withLog(log))
	h.waitIdle()
	h.a.SetOwned(false)
	reads := log.readCount()
	log.add(h.a, wakeMsg("arrived while another replica owned the agent"))
	h.waitSettled(false)
	if s := h.a.Status(); s.InboxPending != 0 || log.readCount() != reads {
		t.Fatalf("a standby agent read its log: %+v, %d reads", s, log.readCount()-reads)
	}
	// A message only memory holds (the API in core NATS mode) has nobody
	// else to hand it on: it stays queued for when the agent is owned here.
	h.a.Send(wakeMsg("from the API"))
	if s := h.a.Status(); s.InboxPending != 1 {
		t.Fatalf("inbox after a memory-only message: %+v", s)
	}
	h.a.SetOwned(true)
	done := h.waitEvent(events.TurnCompleted)
	if done.Data["messages"] != 2 {
		t.Fatalf("the first turn back took %v messages, want 2", done.Data["messages"])
	}
}
