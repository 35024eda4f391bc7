package tracing

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/adk/telemetry"

	"github.com/agent-worker/agent-worker/config"
)

// Scope is the instrumentation scope of the worker's own spans.
const Scope = "github.com/agent-worker/agent-worker"

// Provider is the process's tracer provider: an OTLP exporter behind a
// batch span processor when Settings are on, a no-op otherwise.
type Provider struct {
	tp       trace.TracerProvider
	sdk      *sdktrace.TracerProvider // nil when off
	adk      *telemetry.Providers     // nil when off
	settings Settings
}

// Off is a Provider that records nothing.
func Off() *Provider { return &Provider{tp: noop.NewTracerProvider()} }

// Start builds the exporter s names and registers the provider through
// ADK's telemetry set-up as the process's global OpenTelemetry provider,
// which ADK's own spans (invoke_agent, generate_content, execute_tool)
// are started from: the worker's turn spans and ADK's share one provider,
// one batch and one exporter. instance is service.instance.id (the
// replica's holder name), version service.version. With s off it returns
// Off() and registers nothing. Nothing is sent until the first span
// ends; an unreachable receiver is retried by the exporter and then
// dropped (the OpenTelemetry SDK logs it), never blocking a turn.
func Start(ctx context.Context, s Settings, instance, version string) (*Provider, error) {
	if !s.On() {
		return Off(), nil
	}
	exp, err := exporter(ctx, s)
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP exporter for %s (%s): %w", s.Endpoint, s.Protocol, err)
	}
	res, err := resource.New(ctx, resource.WithAttributes(
		attribute.String("service.name", s.ServiceName),
		attribute.String("service.version", version),
		attribute.String("service.instance.id", instance),
	))
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	sdk := SDK(exp, res, s)
	// ADK's set-up would add an OTLP log exporter of its own when
	// OTEL_EXPORTER_OTLP_ENDPOINT is set; the worker's logs go to its
	// log output, so a provider without processors stands in for it.
	adk, err := telemetry.New(ctx, telemetry.WithTracerProvider(sdk), telemetry.WithResource(res),
		telemetry.WithLoggerProvider(sdklog.NewLoggerProvider()))
	if err != nil {
		_ = sdk.Shutdown(ctx)
		return nil, fmt.Errorf("telemetry: ADK set-up: %w", err)
	}
	adk.SetGlobalOtelProviders()
	return &Provider{tp: sdk, sdk: sdk, adk: adk, settings: s}, nil
}

// SDK is the tracer provider Start builds around exp: a batching span
// processor (batch.go) that sends at least every second, the resource,
// and the sampler s names. Exported for benchmarks that measure it
// without registering it globally.
func SDK(exp sdktrace.SpanExporter, res *resource.Resource, s Settings) *sdktrace.TracerProvider {
	return sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(newBatcher(trimmed{SpanExporter: exp, content: s.CaptureContent}, batchInterval)),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sampler(s)),
	)
}

// Exporter is the OTLP span exporter Start builds for s.
func Exporter(ctx context.Context, s Settings) (sdktrace.SpanExporter, error) {
	return exporter(ctx, s)
}

// Tracer is the worker's own tracer.
func (p *Provider) Tracer() trace.Tracer { return p.tp.Tracer(Scope) }

// TracerProvider is the provider itself (for instrumented libraries).
func (p *Provider) TracerProvider() trace.TracerProvider { return p.tp }

// On reports whether spans are exported.
func (p *Provider) On() bool { return p.sdk != nil }

// Settings are what Start was given.
func (p *Provider) Settings() Settings { return p.settings }

// ForceFlush exports every ended span now.
func (p *Provider) ForceFlush(ctx context.Context) error {
	if p.sdk == nil {
		return nil
	}
	return p.sdk.ForceFlush(ctx)
}

// Shutdown exports what is left, within ctx, and stops the exporter.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p.adk == nil {
		return nil
	}
	return p.adk.Shutdown(ctx)
}

func sampler(s Settings) sdktrace.Sampler {
	switch s.Sampler {
	case "always_on":
		return sdktrace.AlwaysSample()
	case "always_off":
		return sdktrace.NeverSample()
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(s.SamplerArg)
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample())
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(s.SamplerArg))
	}
	return sdktrace.ParentBased(sdktrace.AlwaysSample())
}

// exporter builds the OTLP span exporter of s.Protocol for s.Endpoint.
// The endpoint is set in full, so the OTEL_EXPORTER_OTLP_* variables the
// exporter would read itself cannot disagree with what Resolve decided.
func exporter(ctx context.Context, s Settings) (sdktrace.SpanExporter, error) {
	host, path, insecure := splitEndpoint(s.Endpoint)
	if s.Protocol == config.ProtocolGRPC {
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(host), otlptracegrpc.WithHeaders(s.Headers)}
		if insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		return otlptracegrpc.New(ctx, opts...)
	}
	if !strings.HasSuffix(path, "/v1/traces") {
		path += "/v1/traces" // the endpoint is the receiver's base URL
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(host), otlptracehttp.WithURLPath(path), otlptracehttp.WithHeaders(s.Headers)}
	if insecure {
		opts = append(opts, otlptracehttp.WithInsecure())
	}
	return otlptracehttp.New(ctx, opts...)
}

// splitEndpoint takes an OTLP endpoint apart: its host:port, its path
// without a trailing slash, and whether it is clear text (http://, or a
// bare host:port).
func splitEndpoint(e string) (host, path string, insecure bool) {
	u, err := url.Parse(e)
	if err != nil || !strings.Contains(e, "://") {
		return e, "", true
	}
	return u.Host, strings.TrimSuffix(u.Path, "/"), u.Scheme == "http"
}
