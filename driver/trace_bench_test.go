package driver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agent-worker/agent-worker/tracing"
)

// switchProvider is the process's global tracer provider during the
// benchmark: ADK's spans (started from the global provider, which can be
// set only once a process) go to the SDK while on, to a no-op while off,
// so traced and untraced turns can alternate on one machine moment.
type switchProvider struct {
	embedded.TracerProvider
	on  atomic.Bool
	sdk trace.TracerProvider
}

func (p *switchProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return switchTracer{p: p, on: p.sdk.Tracer(name, opts...), off: noop.NewTracerProvider().Tracer(name)}
}

type switchTracer struct {
	embedded.Tracer
	p       *switchProvider
	on, off trace.Tracer
}

func (t switchTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if t.p.on.Load() {
		return t.on.Start(ctx, name, opts...)
	}
	return t.off.Start(ctx, name, opts...)
}

// BenchmarkTurnTracing times one driver turn with tracing on — every turn
// sampled, ADK's spans and the turn's exported over OTLP/HTTP by the
// batch processor to a local receiver that reads each export — against
// the same turn with tracing off (no tracer; ADK's spans no-ops),
// alternating turn by turn, and reports the ratio (goal ≤ 1.10).
func BenchmarkTurnTracing(b *testing.B) {
	const turns = 2000
	var exports, bytes atomic.Int64
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		exports.Add(1)
		bytes.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer recv.Close()
	ctx := context.Background()
	s := tracing.Settings{Endpoint: recv.URL, Protocol: "http/protobuf", ServiceName: "bench", Sampler: "always_on", SamplerArg: 1}
	exp, err := tracing.Exporter(ctx, s)
	if err != nil {
		b.Fatal(err)
	}
	sdk := tracing.SDK(exp, resource.Empty(), s)
	defer sdk.Shutdown(ctx)
	sw := &switchProvider{sdk: sdk}
	otel.SetTracerProvider(sw)

	for range b.N {
		off := newBenchAgentWith(b, 1, nil, nil)
		on := newBenchAgentWith(b, 1, nil, sw.Tracer(tracing.Scope))
		for i := range 20 { // warm both up
			sw.on.Store(false)
			off.turn(b, i)
			sw.on.Store(true)
			on.turn(b, i)
		}
		var dOff, dOn time.Duration
		for i := range turns {
			sw.on.Store(false)
			dOff += off.turn(b, i)
			sw.on.Store(true)
			dOn += on.turn(b, i)
		}
		sw.on.Store(false)
		off.close()
		on.close()
		if err := sdk.ForceFlush(ctx); err != nil {
			b.Fatal(err)
		}
		ratio := float64(dOn) / float64(dOff)
		fmt.Printf("turn with tracing on (100%% sampled, OTLP/HTTP to a local receiver: %d exports, %d KB) %v, off %v over %d turns each: on/off %.2f (goal ≤ 1.10)\n",
			exports.Load(), bytes.Load()/1024, (dOn / turns).Round(time.Microsecond), (dOff / turns).Round(time.Microsecond), turns, ratio)
		b.ReportMetric(float64(dOn.Nanoseconds())/turns, "on-ns/turn")
		b.ReportMetric(float64(dOff.Nanoseconds())/turns, "off-ns/turn")
		b.ReportMetric(ratio, "on/off")
	}
}
