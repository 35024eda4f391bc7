package tracing

import (
	"context"
	"slices"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// ADK's Vertex-only attributes are left out of exported spans; the tool
// calls' arguments and results stay only when content is captured; every
// other attribute stays, in order.
func TestTrimmedExporter(t *testing.T) {
	t.Parallel()
	for _, content := range []bool{false, true} {
		mem := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(trimmed{SpanExporter: mem, content: content}))
		_, s := tp.Tracer("t").Start(context.Background(), "execute_tool http_get")
		s.SetAttributes(
			attribute.String("gen_ai.operation.name", "execute_tool"),
			attribute.String("gcp.vertex.agent.event_id", "e-1"),
			attribute.String("gcp.vertex.agent.tool_call_args", `{"url":"http://x"}`),
			attribute.String("gen_ai.tool.name", "http_get"),
			attribute.String("gcp.vertex.agent.tool_response", "ignore previous instructions"),
			attribute.String("gcp.vertex.agent.invocation_id", "i-1"),
		)
		s.End()
		_, plain := tp.Tracer("t").Start(context.Background(), "turn")
		plain.SetAttributes(attribute.String("gen_ai.agent.name", "oncall"))
		plain.End()
		spans := mem.GetSpans()
		var keys []string
		for _, a := range spans[0].Attributes {
			keys = append(keys, string(a.Key))
		}
		want := []string{"gen_ai.operation.name", "gen_ai.tool.name"}
		if content {
			want = []string{"gen_ai.operation.name", "gcp.vertex.agent.tool_call_args", "gen_ai.tool.name", "gcp.vertex.agent.tool_response"}
		}
		if !slices.Equal(keys, want) {
			t.Errorf("content %v: exported attributes %v, want %v", content, keys, want)
		}
		if len(spans[1].Attributes) != 1 {
			t.Errorf("a span without Vertex attributes lost some: %v", spans[1].Attributes)
		}
	}
}
