package metrics

import (
	"sync"
	"sync/atomic"

	"github.com/agent-worker/agent-worker/events"
	"github.com/prometheus/client_golang/prometheus"
)

// dropCollector reports agent_worker_events_dropped_total: the events the
// metrics did not count. reason="overflow" is sampled at scrape from the
// subscriptions' Dropped counts (kept after a subscription stops);
// reason="unconfigured" counts events that named an agent or schedule not
// in the config.
type dropCollector struct {
	desc         *prometheus.Desc
	unconfigured atomic.Uint64

	mu      sync.Mutex
	subs    map[*events.Subscription]struct{}
	stopped uint64 // lost by subscriptions already unwatched
}

func newDropCollector() *dropCollector {
	return &dropCollector{
		desc: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "events_dropped_total"),
			"Events the metrics did not count, by reason: overflow (lost because the metrics subscription's buffer was full: the other metrics undercount) or unconfigured (named an agent or schedule that is not configured).",
			[]string{"reason"}, nil),
		subs: map[*events.Subscription]struct{}{},
	}
}

func (c *dropCollector) watch(s *events.Subscription) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.subs[s] = struct{}{}
}

// unwatch keeps what s lost in the total; s must not lose more (it is
// closed).
func (c *dropCollector) unwatch(s *events.Subscription) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.subs[s]; ok {
		delete(c.subs, s)
		c.stopped += s.Dropped()
	}
}

// Describe implements prometheus.Collector.
func (c *dropCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *dropCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	overflow := c.stopped
	for s := range c.subs {
		overflow += s.Dropped()
	}
	c.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(overflow), "overflow")
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(c.unconfigured.Load()), "unconfigured")
}
