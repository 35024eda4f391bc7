package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/tracing"
	"github.com/agent-worker/agent-worker/worker"
	"go.opentelemetry.io/otel"
)

// tracingFlushTimeout bounds how long shutdown waits for the last spans
// to reach the OTLP receiver.
const tracingFlushTimeout = 5 * time.Second

// startTracing starts OpenTelemetry traces as cfg.Telemetry and the
// OTEL_* environment say; off (a no-op provider) when neither names an
// endpoint. A bad OTEL_* value is a configuration error.
func startTracing(ctx context.Context, cfg *config.Config, log *slog.Logger) (*tracing.Provider, error) {
	s, err := tracing.Resolve(cfg.Telemetry, os.LookupEnv)
	if err != nil {
		return nil, configError{err}
	}
	p, err := tracing.Start(ctx, s, worker.Holder(cfg), version)
	if err != nil {
		return nil, err
	}
	if p.On() {
		// An export that fails (the receiver down) is retried by the
		// exporter, then its batch dropped: said here, once per batch.
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			log.Warn("tracing: spans not exported", "error", err)
		}))
		log.Info("tracing on: turns are exported over OTLP", "endpoint", s.Endpoint, "protocol", s.Protocol,
			"service", s.ServiceName, "sampler", s.Sampler, "sampler_arg", s.SamplerArg)
	}
	return p, nil
}

// stopTracing sends the spans still buffered, within tracingFlushTimeout.
func stopTracing(p *tracing.Provider, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), tracingFlushTimeout)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		log.Warn("tracing: spans not all exported at shutdown", "error", err)
	}
}
