package tracing

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// vertexPrefix names the attributes ADK adds for Vertex AI's agent
// tooling (adk-web): event and invocation ids of ADK's own session
// store, which the worker does not expose, and the tool calls' arguments
// and results in full.
const vertexPrefix = "gcp.vertex.agent."

// Content attributes: what a tool was called with and what it returned.
const (
	attrToolArgs     = "gcp.vertex.agent.tool_call_args"
	attrToolResponse = "gcp.vertex.agent.tool_response"
)

// trimmed is an exporter that leaves ADK's Vertex-only attributes out of
// the spans it exports, except, when content is captured, the tool
// calls' arguments and results. Tool results are written by strangers
// (web pages, MCP servers, alert text) and can be 16 KiB each: like the
// GenAI semantic conventions, the worker records content only when asked
// (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true). Leaving the
// rest out also cuts a traced turn's export by a fifth.
type trimmed struct {
	sdktrace.SpanExporter
	content bool
}

func (t trimmed) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	out := make([]sdktrace.ReadOnlySpan, len(spans))
	for i, s := range spans {
		out[i] = t.trim(s)
	}
	return t.SpanExporter.ExportSpans(ctx, out)
}

// trim returns s, or s without the attributes trimmed leaves out.
func (t trimmed) trim(s sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan {
	attrs := s.Attributes()
	keep := -1 // index of the first attribute to leave out
	for i, a := range attrs {
		if t.drop(a) {
			keep = i
			break
		}
	}
	if keep < 0 {
		return s
	}
	kept := make([]attribute.KeyValue, keep, len(attrs))
	copy(kept, attrs[:keep])
	for _, a := range attrs[keep:] {
		if !t.drop(a) {
			kept = append(kept, a)
		}
	}
	return trimmedSpan{ReadOnlySpan: s, attrs: kept}
}

func (t trimmed) drop(a attribute.KeyValue) bool {
	k := string(a.Key)
	if !strings.HasPrefix(k, vertexPrefix) {
		return false
	}
	return !t.content || (k != attrToolArgs && k != attrToolResponse)
}

// trimmedSpan is a span with some attributes left out.
type trimmedSpan struct {
	sdktrace.ReadOnlySpan
	attrs []attribute.KeyValue
}

func (s trimmedSpan) Attributes() []attribute.KeyValue { return s.attrs }
