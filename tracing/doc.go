// Package tracing sets up OpenTelemetry traces for the worker and carries
// trace context across its hops: OTLP export through ADK's telemetry
// set-up (so ADK's agent, model and tool spans and the worker's own turn
// spans share one provider), and the W3C traceparent on NATS messages and
// HTTP requests.
//
// Tracing is off unless an OTLP endpoint is configured (telemetry.endpoint
// or OTEL_EXPORTER_OTLP_ENDPOINT); off, every span is a no-op and costs
// next to nothing. A trace context that arrives on a message (NATS header
// or HTTP header "traceparent") is untrusted: it is only ever used as a
// span link of the turn that drained the message, never as a parent, so a
// stranger cannot graft the worker's spans into a trace of theirs or
// force sampling.
//
// The package does not decide what a turn is: the driver starts the turn
// span; this package only provides the provider, the propagation, and
// the links.
package tracing
