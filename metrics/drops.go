package metrics

import (
	"sync"
	"sync/atomic"

	"github.com/agent-worker/agent-worker/events"
	"github.com/prometheus/client_golang/prometheus"
)

// dropCollector reports agent_worker_events_dropped_total: the events the
// metrics did not count, and (once WatchEventStore is called) the events
// the durable events stream did not store. reason="overflow" is sampled
// at scrape from the subscriptions' Dropped counts (kept after a
// subscription stops); reason="unconfigured" counts events that named an
// agent or schedule not in the config; reason="stream_overflow" and
// "stream_failed" are the store's Unstored counts.
type dropCollector struct {
	desc         *prometheus.Desc
	unconfigured atomic.Uint64
	store        atomic.Pointer[EventStore]

	mu      sync.Mutex
	subs    map[*events.Subscription]struct{}
	stopped uint64 // lost by subscriptions already unwatched
}

func newDropCollector() *dropCollector {
	return &dropCollector{
		desc: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "events_dropped_total"),
			"Events lost on their way, by reason: overflow (the metrics subscription's buffer was full: the other metrics undercount), unconfigured (named an agent or schedule that is not configured: not counted), stream_overflow (the durable events stream's publish buffer was full) or stream_failed (JetStream did not acknowledge the event's publish): not stored, so event streams and NATS consumers never see it.",
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
	if st := c.store.Load(); st != nil {
		full, failed := (*st).Unstored()
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(full), "stream_overflow")
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(failed), "stream_failed")
	}
}

// EventStore is the durable events stream (eventstream.Stream) as the
// metrics see it: Unstored returns how many events it did not store
// because its buffer was full, and because their publish failed; both
// only grow. It is called at scrape time and must not block.
type EventStore interface {
	Unstored() (overflow, failed uint64)
}

// WatchEventStore reports store's unstored events from now on, as
// agent_worker_events_dropped_total{reason="stream_overflow"} and
// {reason="stream_failed"}; without it (core NATS mode: no stream) those
// series do not exist. A later call replaces the store.
func (m *Metrics) WatchEventStore(store EventStore) {
	if store != nil {
		m.drops.store.Store(&store)
	}
}
