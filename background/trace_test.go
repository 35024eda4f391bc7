package background_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/adk/model"

	"github.com/agent-worker/agent-worker/background"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/models/scripted"
	"github.com/agent-worker/agent-worker/tracing"
)

// reports is a Parent that hands on what it is reported.
type reports chan inbox.Message

func (r reports) Report(_ string, m inbox.Message) { r <- m }

// A subagent spawned by a traced tool call runs in a trace of its own,
// linked to the spawning span, with ADK's spans of the run under it; its
// report carries the run's context, so the parent's next turn links
// back. The process's global provider is set here: no other test in the
// package looks at spans.
func TestSubagentRunLinksToItsSpawner(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	otel.SetTracerProvider(tp)

	m := background.New(background.Options{})
	got := make(reports, 1)
	m.Add("boss", got, background.Spec{Max: 1, Model: func() (model.LLM, error) {
		return scripted.New("sub", config.Model{Script: []config.ScriptStep{{Text: "indexed"}}})
	}})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(context.Background())

	ctx, spawner := tp.Tracer("test").Start(context.Background(), "execute_tool spawn_subagent")
	if _, err := m.Spawner("boss").Spawn(ctx, "index the wiki", ""); err != nil {
		t.Fatal(err)
	}
	spawner.End()
	var report inbox.Message
	select {
	case report = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("no report")
	}

	var run sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "subagent boss" {
			run = s
		}
	}
	if run == nil {
		t.Fatal("no subagent span")
	}
	if run.Parent().IsValid() || run.SpanContext().TraceID() == spawner.SpanContext().TraceID() {
		t.Error("the run is in the spawner's trace; it should be a trace of its own")
	}
	if l := run.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != spawner.SpanContext().SpanID() {
		t.Errorf("run links %v, want the spawning span %s", l, spawner.SpanContext().SpanID())
	}
	sc, ok := tracing.Remote(report.TraceParent)
	if !ok || sc.SpanID() != run.SpanContext().SpanID() {
		t.Errorf("report traceparent %q, want the run's span %s", report.TraceParent, run.SpanContext().SpanID())
	}
	nested := false
	for _, s := range rec.Ended() {
		if s.Parent().SpanID() == run.SpanContext().SpanID() {
			nested = true
		}
	}
	if !nested {
		t.Error("no span of the run under the subagent span")
	}
}
