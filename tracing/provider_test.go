package tracing

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// receiver is an OTLP/HTTP trace receiver speaking the real wire format:
// POST /v1/traces with a protobuf ExportTraceServiceRequest (gzip or
// not), answered with a protobuf ExportTraceServiceResponse.
type receiver struct {
	mu      sync.Mutex
	spans   []*tracepb.Span
	service []string
	headers []http.Header
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want POST /v1/traces application/x-protobuf", http.StatusBadRequest)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = gz
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var in coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.headers = append(r.headers, req.Header.Clone())
	for _, rs := range in.ResourceSpans {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				r.service = append(r.service, a.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.ScopeSpans {
			r.spans = append(r.spans, ss.Spans...)
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// TestStartExportsOverOTLPHTTP: a started provider exports the worker's
// spans and those of any tracer from the global provider (which ADK's
// spans come from) to the OTLP/HTTP receiver, with the service name, the
// configured headers and the sampler honoured; Off records nothing.
// Start sets the process's global provider, so this is the package's one
// test that starts one.
func TestStartExportsOverOTLPHTTP(t *testing.T) {
	rec := &receiver{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	ctx := context.Background()
	p, err := Start(ctx, Settings{Endpoint: srv.URL, Protocol: "http/protobuf", ServiceName: "triage", Sampler: DefaultSampler, SamplerArg: 1,
		Headers: map[string]string{"X-Api-Key": "k"}}, "replica-1", "v9")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(ctx)
	if !p.On() {
		t.Fatal("provider with an endpoint is off")
	}
	_, own := p.Tracer().Start(ctx, "turn oncall")
	own.End()
	_, global := otel.Tracer("google.golang.org/adk").Start(ctx, "generate_content fake-1")
	global.End()
	if err := p.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	names := map[string]bool{}
	for _, s := range rec.spans {
		names[s.Name] = true
	}
	if !names["turn oncall"] || !names["generate_content fake-1"] {
		t.Errorf("receiver got spans %v, want the worker's and the global tracer's", names)
	}
	for _, s := range rec.service {
		if s != "triage" {
			t.Errorf("service.name = %q, want triage", s)
		}
	}
	if len(rec.headers) == 0 || rec.headers[0].Get("X-Api-Key") != "k" {
		t.Errorf("export headers %v lack X-Api-Key", rec.headers)
	}

	off := Off()
	_, s := off.Tracer().Start(ctx, "nothing")
	if s.SpanContext().IsValid() || off.On() {
		t.Error("Off records spans")
	}
}

// TestSampler: always_off and a ratio of 0 sample no turn; always_on
// every one.
func TestSampler(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		s    Settings
		want bool
	}{
		{Settings{Sampler: "always_off"}, false},
		{Settings{Sampler: "traceidratio", SamplerArg: 0}, false},
		{Settings{Sampler: "parentbased_traceidratio", SamplerArg: 1}, true},
		{Settings{Sampler: "always_on"}, true},
		{Settings{Sampler: DefaultSampler}, true},
	} {
		tp := newTestProvider(c.s)
		_, span := tp.Tracer("t").Start(context.Background(), "x")
		if got := span.SpanContext().IsSampled(); got != c.want {
			t.Errorf("%s(%g): sampled = %v, want %v", c.s.Sampler, c.s.SamplerArg, got, c.want)
		}
		span.End()
	}
}

func newTestProvider(s Settings) *sdktrace.TracerProvider {
	return sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler(s)))
}
