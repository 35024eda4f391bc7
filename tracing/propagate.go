package tracing

import (
	"context"
	"net/http"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Header names of the W3C trace context.
const (
	HeaderTraceParent = "traceparent"
	HeaderTraceState  = "tracestate"
)

var w3c = propagation.TraceContext{}

// TraceParent returns ctx's span as a traceparent header value, or ""
// when ctx holds no valid span context (tracing off, no span).
func TraceParent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	w3c.Inject(ctx, c)
	return c[HeaderTraceParent]
}

// InjectNATS sets h's traceparent (and tracestate) from ctx's span; it
// leaves h alone when ctx holds none. NATS headers are case-sensitive:
// the lower-case W3C names are used, as other OpenTelemetry NATS
// instrumentations do.
func InjectNATS(ctx context.Context, h nats.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	c := propagation.MapCarrier{}
	w3c.Inject(ctx, c)
	for k, v := range c {
		h[k] = []string{v}
	}
}

// InjectHTTP sets h's traceparent (and tracestate) from ctx's span; it
// leaves h alone when ctx holds none.
func InjectHTTP(ctx context.Context, h http.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	w3c.Inject(ctx, propagation.HeaderCarrier(h))
}

// SetNATS sets h's traceparent to a traceparent carried along (a
// message's, a subagent run's), under the W3C name; "" sets nothing.
func SetNATS(h nats.Header, traceparent string) {
	if traceparent != "" {
		h[HeaderTraceParent] = []string{traceparent}
	}
}

// FromNATS is the traceparent of a NATS message's headers, in either
// case; "" when it has none.
func FromNATS(h nats.Header) string {
	if v := h.Get(HeaderTraceParent); v != "" {
		return v
	}
	return h.Get("Traceparent")
}

// Valid reports whether traceparent is a well-formed W3C traceparent
// with a valid trace and span id. A message's traceparent is kept only
// when it is, so a stranger's header cannot smuggle text through.
func Valid(traceparent string) bool {
	_, ok := Remote(traceparent)
	return ok
}

// Remote parses traceparent into the remote span context it names.
func Remote(traceparent string) (trace.SpanContext, bool) {
	if traceparent == "" || len(traceparent) > 128 {
		return trace.SpanContext{}, false
	}
	ctx := w3c.Extract(context.Background(), propagation.MapCarrier{HeaderTraceParent: traceparent})
	sc := trace.SpanContextFromContext(ctx)
	return sc, sc.IsValid()
}

// Transport wraps base (nil: http.DefaultTransport) so every request
// carries its context's traceparent: the MCP client's HTTP calls made
// during a tool call carry the tool span's context.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return roundTripper{base}
}

type roundTripper struct{ base http.RoundTripper }

func (r roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if trace.SpanContextFromContext(req.Context()).IsValid() {
		req = req.Clone(req.Context())
		InjectHTTP(req.Context(), req.Header)
	}
	return r.base.RoundTrip(req)
}
