package metrics_test

import (
	"sync/atomic"
	"testing"

	"github.com/agent-worker/agent-worker/metrics"
)

// store is an events stream as the metrics see it.
type store struct{ overflow, failed atomic.Uint64 }

func (s *store) Unstored() (uint64, uint64) { return s.overflow.Load(), s.failed.Load() }

// The events the durable events stream did not store are reported, by
// reason, only once a stream is watched (core NATS mode has none), and
// read at every scrape.
func TestEventStoreLossesAreReportedAsDroppedEvents(t *testing.T) {
	t.Parallel()
	m := metrics.New(testAgents(), nil)
	const full, failed = `agent_worker_events_dropped_total{reason="stream_overflow"}`, `agent_worker_events_dropped_total{reason="stream_failed"}`
	got := series(t, m.Registry())
	if _, ok := got[full]; ok {
		t.Fatalf("%s reported without a stream", full)
	}
	s := &store{}
	m.WatchEventStore(s)
	if got := series(t, m.Registry()); got[full] != 0 || got[failed] != 0 {
		t.Fatalf("a fresh stream reports %v, %v", got[full], got[failed])
	} else if _, ok := got[failed]; !ok {
		t.Fatalf("%s missing once a stream is watched", failed)
	}
	s.overflow.Add(3)
	s.failed.Add(2)
	if got := series(t, m.Registry()); got[full] != 3 || got[failed] != 2 {
		t.Fatalf("reported overflow %v, failed %v; want 3, 2", got[full], got[failed])
	}
}
