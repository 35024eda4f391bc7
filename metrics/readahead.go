package metrics

import "github.com/prometheus/client_golang/prometheus"

// ReadAheadSource reports, at scrape time, the input window of this
// replica's log (package natsinbox): the bytes it holds for the agents'
// next turns, and how many reads of an agent's input it served whole and
// how many went to the stream. ok is false without JetStream.
type ReadAheadSource interface {
	ReadAhead() (held int64, fromWindow, fromStream uint64, ok bool)
}

type readAheadMetrics struct {
	held, reads *prometheus.Desc
	src         Source
}

func newReadAheadMetrics(src Source) *readAheadMetrics {
	return &readAheadMetrics{src: src,
		held: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "read_ahead_bytes"),
			"Bytes of input this replica keeps in memory, from its router to the agents' next turns, at most nats.read_ahead_bytes. No series without JetStream.", nil, nil),
		reads: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "input_reads_total"),
			"Reads of an agent's input by where they were served: window (memory: what the router kept) or stream (a batch direct get: input waiting at start, routed before the agent moved here, or let go from a full window — raise nats.read_ahead_bytes if these grow with a backlog). No series without JetStream.", []string{"source"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *readAheadMetrics) Describe(ch chan<- *prometheus.Desc) { ch <- c.held; ch <- c.reads }

// Collect implements prometheus.Collector.
func (c *readAheadMetrics) Collect(ch chan<- prometheus.Metric) {
	rs, ok := c.src.(ReadAheadSource)
	if !ok {
		return
	}
	held, window, stream, ok := rs.ReadAhead()
	if !ok {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(held))
	ch <- prometheus.MustNewConstMetric(c.reads, prometheus.CounterValue, float64(window), "window")
	ch <- prometheus.MustNewConstMetric(c.reads, prometheus.CounterValue, float64(stream), "stream")
}
