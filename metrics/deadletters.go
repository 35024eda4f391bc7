package metrics

import "github.com/prometheus/client_golang/prometheus"

// DeadLetterSource reports, at scrape time, how many dead letters the
// dead-letter stream keeps (agent_worker_dead_letters_stored); ok false
// when it cannot say (core NATS mode, NATS down). It may take a NATS round
// trip, bounded by the source.
type DeadLetterSource interface {
	DeadLettersStored() (n uint64, ok bool)
}

type deadLetterMetrics struct {
	stored *prometheus.Desc
	src    Source
}

func newDeadLetterMetrics(src Source) *deadLetterMetrics {
	return &deadLetterMetrics{src: src, stored: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "dead_letters_stored"),
		"Dead letters (rejected and dropped input of every agent) kept in the dead-letter stream for reading and replay (GET /v1/agents/{name}/dlq), within nats.dlq_max_age and dlq_max_bytes. No series without JetStream: dead letters are not kept then.", nil, nil)}
}

// Describe implements prometheus.Collector.
func (c *deadLetterMetrics) Describe(ch chan<- *prometheus.Desc) { ch <- c.stored }

// Collect implements prometheus.Collector.
func (c *deadLetterMetrics) Collect(ch chan<- prometheus.Metric) {
	ds, ok := c.src.(DeadLetterSource)
	if !ok {
		return
	}
	if n, ok := ds.DeadLettersStored(); ok {
		ch <- prometheus.MustNewConstMetric(c.stored, prometheus.GaugeValue, float64(n))
	}
}
