package worker

import (
	"github.com/agent-worker/agent-worker/config"
	"go.opentelemetry.io/otel/trace"
)

// tracer is the driver's turn tracer: nil (turns untraced) unless
// Options.Tracing exports spans.
func (o Options) tracer() trace.Tracer {
	if o.Tracing == nil || !o.Tracing.On() {
		return nil
	}
	return o.Tracing.Tracer()
}

// Holder is the name this replica goes by among the replicas
// (lease.holder, else the host name): the service.instance.id of its
// spans.
func Holder(cfg *config.Config) string { return holderName(cfg) }
