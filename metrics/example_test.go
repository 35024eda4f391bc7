package metrics_test

import (
	"fmt"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/metrics"
)

// A worker builds its metrics from the config, observes its event bus,
// and serves Handler on /metrics. stop returns once every event published
// before it has been counted.
func Example() {
	m := metrics.New([]metrics.AgentInfo{{Name: "oncall", Model: "gpt-4.1-mini", Priced: true, Tools: []string{"publish"}}}, nil)
	bus := events.NewBus(0, nil)
	stop := m.Observe(bus)
	bus.Publish(events.Event{Agent: "oncall", Type: events.TurnCompleted, Data: map[string]any{"duration_ms": int64(1200)}})
	bus.Publish(events.Event{Agent: "oncall", Type: "tool-call", Data: map[string]any{"tool": "invented_by_the_model", "outcome": "ok"}})
	stop()

	mfs, _ := m.Registry().Gather()
	for _, mf := range mfs {
		if mf.GetName() != "agent_worker_tool_calls_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			if v := s.GetCounter().GetValue(); v > 0 {
				fmt.Print(mf.GetName())
				for _, l := range s.GetLabel() {
					fmt.Printf(" %s=%s", l.GetName(), l.GetValue())
				}
				fmt.Println(":", v)
			}
		}
	}
	// Output:
	// agent_worker_tool_calls_total agent=oncall outcome=ok tool=other: 1
}
