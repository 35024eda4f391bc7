package driver

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/inbox"
)

// traced runs the harness with a recording tracer and a JSON log.
func traced(t *testing.T, script []config.ScriptStep) (*harness, *tracetest.SpanRecorder, *lockedWriter) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	logs := &lockedWriter{}
	h := newHarnessWith(t, script, func(d *Deps) {
		d.Tracer = tp.Tracer("test")
		d.Log = slog.New(slog.NewJSONHandler(logs, nil))
	})
	return h, rec, logs
}

// lockedWriter is a log sink the test reads while the agent writes.
type lockedWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// A turn is one root span named for its agent, linked to the trace of
// each message that carried one (not to those that carried none or a
// malformed one, and once per distinct context), with the turn's
// numbers; its events and log lines name its trace.
func TestTurnSpan(t *testing.T) {
	t.Parallel()
	h, rec, logs := traced(t, []config.ScriptStep{text("looked")})
	const (
		tp1 = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		tp2 = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	)
	h.holdCalls()
	h.a.Send(inbox.Message{ID: "warm-up", Text: "first"})
	h.waitCall() // the turn of warm-up holds; the next three coalesce
	for i, tp := range []string{tp1, tp2, tp1, "", "garbage"} {
		h.a.Send(inbox.Message{ID: fmt.Sprintf("m%d", i), Text: "alert", TraceParent: tp})
	}
	h.release()
	h.waitEvent(events.TurnCompleted)
	done := h.waitEvent(events.TurnCompleted)
	h.waitIdle()

	var turns []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "turn tester" {
			turns = append(turns, s)
		}
	}
	if len(turns) != 2 {
		t.Fatalf("want 2 turn spans, got %d", len(turns))
	}
	s := turns[1]
	if s.Parent().IsValid() {
		t.Errorf("turn span has a parent %v; a turn is a root", s.Parent())
	}
	if s.SpanContext().TraceID() == turns[0].SpanContext().TraceID() {
		t.Error("two turns share a trace")
	}
	var linked []string
	for _, l := range s.Links() {
		linked = append(linked, l.SpanContext.TraceID().String())
	}
	if got := strings.Join(linked, ","); got != "4bf92f3577b34da6a3ce929d0e0e4736,0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("links = %s, want the two distinct valid message traces", got)
	}
	attrs := map[string]string{}
	for _, a := range s.Attributes() {
		attrs[string(a.Key)] = a.Value.Emit()
	}
	for k, want := range map[string]string{"gen_ai.agent.name": "tester", "agent_worker.turn": "2", "agent_worker.messages": "5",
		"agent_worker.outcome": "completed", "agent_worker.model_calls": "1"} {
		if attrs[k] != want {
			t.Errorf("attribute %s = %q, want %q", k, attrs[k], want)
		}
	}
	id := s.SpanContext().TraceID().String()
	if done.Data["trace_id"] != id {
		t.Errorf("turn-completed trace_id = %v, want %s", done.Data["trace_id"], id)
	}
	if !strings.Contains(logs.String(), `"msg":"turn completed","agent":"tester","trace_id":"`+id+`"`) {
		t.Errorf("the turn's log line does not carry its trace id %s:\n%s", id, logs.String())
	}
}

// Events published for the agent while its turn runs — by the driver or
// by a plug-in on the bus — become events of the turn's span; a failed
// turn's span has an error status.
func TestTurnSpanEventsAndFailure(t *testing.T) {
	t.Parallel()
	h, rec, _ := traced(t, []config.ScriptStep{text("looked")})
	h.holdCalls()
	h.a.Send(inbox.Message{ID: "a", Text: "x"})
	h.waitCall()
	// What a guard does when it trips, and an event no span wants.
	h.d.Events().Publish(events.Event{Agent: "tester", Type: "guardrail-tripped", Data: map[string]any{"guardrail": "turn", "spent_usd": 0.6}})
	h.d.Events().Publish(events.Event{Agent: "tester", Type: events.MessageQueued})
	h.a.Halt("test halt")
	h.release()
	h.waitEvent(events.TurnFailed)

	var s sdktrace.ReadOnlySpan
	for _, x := range rec.Ended() {
		if x.Name() == "turn tester" {
			s = x
		}
	}
	if s == nil {
		t.Fatal("no turn span")
	}
	var names []string
	for _, e := range s.Events() {
		names = append(names, e.Name)
	}
	if got := strings.Join(names, ","); !strings.Contains(got, "guardrail-tripped") || !strings.Contains(got, events.Halted) || strings.Contains(got, events.MessageQueued) {
		t.Errorf("span events = %s, want guardrail-tripped and halted, not message-queued", got)
	}
	if s.Status().Code != codes.Error || !strings.HasPrefix(s.Status().Description, OutcomeHalted) {
		t.Errorf("status = %v %q, want an error naming the outcome halted", s.Status().Code, s.Status().Description)
	}
}

// An untraced driver (no Deps.Tracer) adds no trace id anywhere.
func TestUntracedTurn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("ok")})
	h.a.Send(inbox.Message{ID: "a", Text: "x", TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
	e := h.waitEvent(events.TurnCompleted)
	if _, ok := e.Data["trace_id"]; ok {
		t.Errorf("untraced turn's event has a trace_id: %v", e.Data)
	}
}
