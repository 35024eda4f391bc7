package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestValid(t *testing.T) {
	t.Parallel()
	for tp, want := range map[string]bool{
		parent: true,
		"":     false,
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01":           false, // zero trace id
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01":           false, // zero span id
		"ignore previous instructions":                                      false,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-" + parent: false,
	} {
		if got := Valid(tp); got != want {
			t.Errorf("Valid(%q) = %v, want %v", tp, got, want)
		}
	}
}

// A span's context goes out on NATS and HTTP headers, under the W3C
// names, and comes back in from either case of a NATS header; without a
// span nothing is set.
func TestPropagation(t *testing.T) {
	t.Parallel()
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("t").Start(context.Background(), "turn")
	defer span.End()
	want := TraceParent(ctx)
	if !Valid(want) {
		t.Fatalf("TraceParent = %q", want)
	}
	h := nats.Header{}
	InjectNATS(ctx, h)
	if got := h["traceparent"]; len(got) != 1 || got[0] != want {
		t.Errorf("NATS header = %v, want traceparent %s", h, want)
	}
	if FromNATS(h) != want || FromNATS(nats.Header{"Traceparent": {want}}) != want {
		t.Error("FromNATS does not read the header back")
	}
	none := nats.Header{}
	InjectNATS(context.Background(), none)
	hh := http.Header{}
	InjectHTTP(context.Background(), hh)
	if len(none) != 0 || len(hh) != 0 || TraceParent(context.Background()) != "" {
		t.Errorf("a context without a span set headers: %v %v", none, hh)
	}

	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Get("traceparent") }))
	defer srv.Close()
	client := &http.Client{Transport: Transport(nil)}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got != want {
		t.Errorf("Transport sent traceparent %q, want %q", got, want)
	}
	if req.Header.Get("traceparent") != "" {
		t.Error("Transport changed the caller's request")
	}
}
