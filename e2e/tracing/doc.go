// Package tracing holds the end-to-end test of the worker's traces
// against a real trace backend: Jaeger v1.76.0 (the all-in-one binary,
// built once from the Go module proxy into the user's cache directory
// and reused), receiving OTLP from an in-process worker. A message
// published with a traceparent must produce one trace holding the turn,
// its model calls and its tool calls, linked to the message's trace.
package tracing
