package metrics

import "github.com/prometheus/client_golang/prometheus"

// LedgerSource reports, at scrape time, how the guard's spend ledgers
// reach the store (package guard keeps them in memory and writes them at
// turn end, at a trip and at a reset; a failed write is retried until it
// succeeds). It must not block.
type LedgerSource interface {
	// LedgerWriteFailures counts failed ledger writes since start.
	LedgerWriteFailures() uint64
	// LedgersUnstored counts ledgers holding spend not yet stored (a
	// write failing and retried, or a turn running).
	LedgersUnstored() int
}

// ledgerMetrics are agent_worker_ledger_write_failures_total and
// agent_worker_ledgers_unstored, read from a LedgerSource.
type ledgerMetrics struct {
	failures, unstored *prometheus.Desc
	src                Source
}

func newLedgerMetrics(src Source) *ledgerMetrics {
	return &ledgerMetrics{
		failures: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "ledger_write_failures_total"),
			"Failed writes of spend ledgers to the store; each is retried until it succeeds, and while one fails the agent's next model call waits (an outage, not the messages' fault).", nil, nil),
		unstored: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "ledgers_unstored"),
			"Spend ledgers holding spend not yet in the store: a turn running, or a write failing and retried.", nil, nil),
		src: src,
	}
}

// Describe implements prometheus.Collector.
func (l *ledgerMetrics) Describe(ch chan<- *prometheus.Desc) { ch <- l.failures; ch <- l.unstored }

// Collect implements prometheus.Collector: nothing without a LedgerSource.
func (l *ledgerMetrics) Collect(ch chan<- prometheus.Metric) {
	ls, ok := l.src.(LedgerSource)
	if !ok {
		return
	}
	ch <- prometheus.MustNewConstMetric(l.failures, prometheus.CounterValue, float64(ls.LedgerWriteFailures()))
	ch <- prometheus.MustNewConstMetric(l.unstored, prometheus.GaugeValue, float64(ls.LedgersUnstored()))
}
