package metrics

import "github.com/prometheus/client_golang/prometheus"

// BindingSource reports, at scrape time, how many agents this replica
// owns but does not consume (agent_worker_agents_not_consuming): their
// NATS consumers could not be bound, and the binding retries. It must not
// block.
type BindingSource interface {
	NotConsuming() int
}

// bindingMetrics are the metrics of the agents' NATS consumers.
type bindingMetrics struct {
	failures     *prometheus.CounterVec
	notConsuming *prometheus.Desc
	src          Source
}

func newBindingMetrics(src Source) *bindingMetrics {
	return &bindingMetrics{
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "bind_failures_total",
			Help: "Failed attempts to bind an owned agent's NATS consumers (the stream's consumer limit reached, NATS unreachable, ...); each is retried with backoff. No series until an agent's first failure."},
			[]string{"agent"}),
		notConsuming: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "agents_not_consuming"),
			"Agents this replica owns whose NATS consumers are not bound: their messages wait in the stream, /readyz answers 503 naming them, and binding is retried.", nil, nil),
		src: src,
	}
}

func (b *bindingMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{b.failures, b}
}

// Describe implements prometheus.Collector.
func (b *bindingMetrics) Describe(ch chan<- *prometheus.Desc) { ch <- b.notConsuming }

// Collect implements prometheus.Collector: 0 without a BindingSource.
func (b *bindingMetrics) Collect(ch chan<- prometheus.Metric) {
	n := 0
	if bs, ok := b.src.(BindingSource); ok {
		n = bs.NotConsuming()
	}
	ch <- prometheus.MustNewConstMetric(b.notConsuming, prometheus.GaugeValue, float64(n))
}

// BindFailed counts one failed bind of agent's consumers
// (agent_worker_bind_failures_total).
func (m *Metrics) BindFailed(agent string) {
	m.binding.failures.WithLabelValues(agent).Inc()
}
