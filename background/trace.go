package background

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/agent-worker/agent-worker/tracing"
)

// startSpan starts the span of one run of subagent s: a root of its own
// trace (a subagent runs long after the spawning turn ended), linked to
// the turn that spawned it. ADK's spans of the run nest under it, and its
// report carries it (sub.trace), so the parent's turn that reads the
// report links to the run. The tracer is the process's global one, which
// tracing.Start sets (a no-op when tracing is off).
func (m *Manager) startSpan(ctx context.Context, f *family, s *sub) (context.Context, trace.Span) {
	var links []trace.Link
	if sc, ok := tracing.Remote(s.link); ok {
		links = append(links, trace.Link{SpanContext: sc})
	}
	ctx, span := otel.Tracer(tracing.Scope).Start(ctx, "subagent "+f.name, trace.WithNewRoot(), trace.WithLinks(links...),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "invoke_agent"),
			attribute.String("gen_ai.agent.name", "subagent"),
			attribute.String("agent_worker.parent", f.name),
			attribute.String("agent_worker.subagent", s.id),
			attribute.Int("agent_worker.run", s.run),
		))
	s.trace = tracing.TraceParent(ctx)
	return ctx, span
}
