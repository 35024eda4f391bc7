package driver

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/turnlog"
)

func withID(m inbox.Message, id string) inbox.Message { m.ID = id; return m }

// flushRecords waits for the turn log's background writes.
func (h *harness) flushRecords() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := h.d.TurnLog().Flush(ctx); err != nil {
		h.t.Fatal(err)
	}
}

// Every message gets an id; the turn's events name the ids it drained,
// and each message's handling is announced with its turn after the
// turn completed.
func TestTurnEventsCarryMessageIDs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("ok")})
	h.a.Pause()
	h.a.Send(withID(wakeMsg("one"), "m-1"))
	h.a.Send(wakeMsg("no id"))
	h.a.Send(withID(deferredMsg("three"), "m-3"))
	if err := h.a.Resume(""); err != nil {
		t.Fatal(err)
	}
	started := h.waitEvent(events.TurnStarted)
	ids, _ := started.Data["ids"].([]string)
	if len(ids) != 3 || ids[0] != "m-1" || !strings.HasPrefix(ids[1], "msg-") || ids[2] != "m-3" || started.Data["messages"] != 3 {
		t.Fatalf("turn-started: %v", started.Data)
	}
	done := h.waitEvent(events.TurnCompleted)
	if got, _ := done.Data["ids"].([]string); !slices.Equal(got, ids) {
		t.Fatalf("turn-completed ids %v, want %v", got, ids)
	}
	var handled []string
	for range ids {
		e := h.waitEvent(events.MessageHandled)
		if e.Data["turn"] != uint64(1) || e.Data["outcome"] != OutcomeCompleted {
			t.Fatalf("message-handled: %v", e.Data)
		}
		handled = append(handled, e.Data["id"].(string))
	}
	if !slices.Equal(handled, ids) {
		t.Fatalf("message-handled for %v, want %v", handled, ids)
	}
}

// A turn event lists at most MaxEventIDs ids and counts them all.
func TestTurnEventIDsAreBounded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("ok")}, func(s *Spec) { s.InboxCap = 100 })
	h.a.Pause()
	for range MaxEventIDs + 7 {
		h.a.Send(wakeMsg("x"))
	}
	if err := h.a.Resume(""); err != nil {
		t.Fatal(err)
	}
	e := h.waitEvent(events.TurnCompleted)
	if ids, _ := e.Data["ids"].([]string); len(ids) != MaxEventIDs || e.Data["messages"] != MaxEventIDs+7 {
		t.Fatalf("%d ids, messages %v", len(ids), e.Data["messages"])
	}
}

// The owner's memory answers where a message is at each step: queued,
// running in turn n, handled by turn n; and a failed turn's messages are
// named by turn-failed and go back to the queue.
func TestMessageMovesQueuedRunningHandled(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("ok")})
	if st := h.a.Message("m-1"); st.Status != MessageUnknown {
		t.Fatalf("before: %+v", st)
	}
	h.holdCalls()
	h.failCalls(context.DeadlineExceeded) // the first turn fails
	h.a.Pause()
	h.a.Send(withID(wakeMsg("first"), "m-1"))
	if st := h.a.Message("m-1"); st.Status != MessageQueued || st.Kind != "inbox" || st.Source != "test" || st.Received == nil {
		t.Fatalf("queued: %+v", st)
	}
	if err := h.a.Resume(""); err != nil {
		t.Fatal(err)
	}
	failed := h.waitEvent(events.TurnFailed)
	h.waitCall() // the failed call
	if ids, _ := failed.Data["ids"].([]string); !slices.Equal(ids, []string{"m-1"}) || failed.Data["messages"] != 1 {
		t.Fatalf("turn-failed: %v", failed.Data)
	}
	h.waitSettled(false)
	if st := h.a.Message("m-1"); st.Status != MessageQueued || st.Attempts != 1 {
		t.Fatalf("after a failed turn: %+v", st)
	}
	h.clock.Advance(time.Hour) // the retry's backoff
	h.waitCall()
	if st := h.a.Message("m-1"); st.Status != MessageRunning || st.Turn != 2 {
		t.Fatalf("running: %+v", st)
	}
	h.a.Send(withID(wakeMsg("second"), "m-2"))
	if st := h.a.Message("m-2"); st.Status != MessageQueued {
		t.Fatalf("m-2 while turn 2 runs: %+v", st)
	}
	h.release()
	h.waitEvent(events.TurnCompleted)
	h.waitIdle()
	if st := h.a.Message("m-1"); st.Status != MessageHandled || st.Turn != 2 {
		t.Fatalf("handled: %+v", st)
	}
	if st := h.a.Message("m-2"); st.Status != MessageHandled || st.Turn != 3 {
		t.Fatalf("m-2: %+v", st)
	}
}

// Every turn, completed or failed, leaves one summary in the turn log:
// its messages, tool calls with arguments and outcomes, final text and
// tokens.
func TestTurnSummariesAreRecorded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{
		call("report_done", map[string]any{"summary": "disk cleaned"}),
		call("report_done", map[string]any{"summary": ""}),
		text("cleaned /var/log on db-1"),
	})
	h.a.Send(withID(wakeMsg("disk full on db-1"), "alert-7"))
	h.waitEvent(events.TurnCompleted)
	h.waitIdle()
	h.failCalls(context.DeadlineExceeded)
	h.a.Send(withID(wakeMsg("again"), "alert-8"))
	h.waitEvent(events.TurnFailed)
	h.waitSettled(false)
	h.flushRecords()

	turns, err := h.d.TurnLog().Recent(t.Context(), "tester", 10)
	if err != nil || len(turns) != 2 {
		t.Fatalf("%d turns, %v", len(turns), err)
	}
	failed, done := turns[0], turns[1]
	if done.N != 1 || done.Outcome != OutcomeCompleted || done.Text != "cleaned /var/log on db-1" || done.ModelCalls != 3 ||
		done.TokensIn != 300 || done.TokensOut != 20 || done.MessageCount != 1 || done.Started.IsZero() || len(done.Wakes) != 1 {
		t.Errorf("completed turn: %+v", done)
	}
	if len(done.Messages) != 1 || done.Messages[0] != (turnlog.Message{ID: "alert-7", Source: "test", Kind: "inbox"}) {
		t.Errorf("messages: %+v", done.Messages)
	}
	want := []turnlog.ToolCall{
		{Name: "report_done", Args: `{"summary":"disk cleaned"}`, Outcome: turnlog.ToolOK},
		{Name: "report_done", Args: `{"summary":""}`, Outcome: turnlog.ToolError, Error: "summary is required"},
	}
	if !slices.Equal(done.ToolCalls, want) || done.ToolCallCount != 2 {
		t.Errorf("tool calls %+v", done.ToolCalls)
	}
	if failed.N != 2 || failed.Outcome != OutcomeFailed || failed.Error == "" || len(failed.Messages) != 1 || failed.Messages[0].ID != "alert-8" {
		t.Errorf("failed turn: %+v", failed)
	}
}

// A message dropped from memory (it never went through NATS, so no
// binding dead-letters it) leaves a dead-letter record under its id.
func TestDroppedMessageIsRecorded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("ok")}, func(s *Spec) { s.InboxCap = 1 })
	h.a.Pause()
	h.a.Send(withID(wakeMsg("old"), "old-1"))
	h.a.Send(withID(wakeMsg("new"), "new-1"))
	h.flushRecords()
	d, err := h.d.TurnLog().DeadLettered(t.Context(), "tester", "old-1")
	if err != nil || d == nil || d.Reason != inbox.RejectDropped || d.Detail != "inbox full" || d.Subject != "test" {
		t.Fatalf("dead-letter record %+v, %v", d, err)
	}
	if st := h.a.Message("new-1"); st.Status != MessageQueued {
		t.Fatalf("new-1: %+v", st)
	}
}
