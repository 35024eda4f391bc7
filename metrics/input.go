package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agent-worker/agent-worker/natsbus"
)

// inputMetrics are the metrics of the agents' input log.
type inputMetrics struct {
	refused *prometheus.CounterVec
}

func newInputMetrics() *inputMetrics {
	m := &inputMetrics{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "input_refused_total",
			Help: "Publishes of the API (messages, the Alertmanager receiver, dead-letter replay) that the input stream refused for a bound it keeps with discard-new: reason subject_full (an agent's backlog at nats.max_msgs_per_subject) or stream_full (nats.max_bytes). The caller got HTTP 507; nothing waiting was dropped. (Subagent reports retry until accepted, logging each refusal.)"},
			[]string{"reason"}),
	}
	for _, r := range natsbus.FullReasons {
		m.refused.WithLabelValues(r)
	}
	return m
}

func (i *inputMetrics) collectors() []prometheus.Collector { return []prometheus.Collector{i.refused} }

// InputRefused counts one publish the input stream refused for reason
// (natsbus.FullSubject, natsbus.FullStream).
func (m *Metrics) InputRefused(reason string) {
	m.input.refused.WithLabelValues(oneOf(reason, natsbus.FullReasons)).Inc()
}
