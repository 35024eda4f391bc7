package metrics

import (
	"testing"

	"github.com/agent-worker/agent-worker/events"
	"github.com/prometheus/client_golang/prometheus"
)

// The observer drains its 8192-event buffer as fast as it can, so a test
// through Observe cannot make it overflow without a sleep; the collector
// is tested on subscriptions that nobody reads.
func TestDropCollectorCountsOverflowAcrossStop(t *testing.T) {
	t.Parallel()
	bus := events.NewBus(0, nil)
	c := newDropCollector()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	want := func(overflow, unconfigured float64) {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			if mf.GetName() != "agent_worker_events_dropped_total" {
				t.Fatalf("unexpected family %s", mf.GetName())
			}
			for _, m := range mf.GetMetric() {
				got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			}
		}
		if got["overflow"] != overflow || got["unconfigured"] != unconfigured || len(got) != 2 {
			t.Errorf("events_dropped_total = %v, want overflow %g, unconfigured %g", got, overflow, unconfigured)
		}
	}

	sub := bus.Subscribe(1, nil)
	c.watch(sub)
	for range 4 {
		bus.Publish(events.Event{Agent: "a", Type: events.Wake})
	}
	c.unconfigured.Add(2)
	want(3, 2) // one buffered, three lost

	second := bus.Subscribe(1, nil)
	c.watch(second)
	bus.Publish(events.Event{Agent: "a", Type: events.Wake}) // sub loses one more; second buffers it
	want(4, 2)

	sub.Close()
	c.unwatch(sub)
	c.unwatch(sub)                                           // twice: counted once
	bus.Publish(events.Event{Agent: "a", Type: events.Wake}) // second loses one
	want(5, 2)                                               // what a stopped subscription lost stays counted
}
