package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agent-worker/agent-worker/events"
)

// askOutcomes are the outcome label values of asks_total: the driver's
// asked event's outcome (driver.AskAnswered, ...); any other value is
// counted as "other".
var askOutcomes = []string{"answered", "refused", "failed", "timeout", "cancelled"}

// askMetrics count operators' asks (the driver's asked events, published
// by the agent's owner). An ask's model usage and cost are in the
// model_* families, as any call's.
type askMetrics struct {
	asks *prometheus.CounterVec
}

func newAskMetrics() askMetrics {
	return askMetrics{asks: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "asks_total",
		Help: "Operators' side questions to an agent (POST /v1/agents/{name}/ask), by outcome: answered, refused (halted, a cost ceiling, another ask running, stopped), failed (the model call failed), timeout, cancelled (the caller went away, or the worker shut down). Counted by the agent's owner."},
		[]string{"agent", "outcome"})}
}

func (am askMetrics) precreate(agent string) {
	for _, o := range askOutcomes {
		am.asks.WithLabelValues(agent, o)
	}
}

// record counts one asked event of a configured agent.
func (am askMetrics) record(e events.Event) {
	am.asks.WithLabelValues(e.Agent, oneOf(text(e.Data["outcome"]), askOutcomes)).Inc()
}
