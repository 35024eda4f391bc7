package metrics_test

import (
	"testing"

	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/metrics"
)

// The driver's memory events are counted per agent and outcome, the fold
// cost and the turns dropped added up; the memory's size is the owner's
// gauge only.
func TestMemoryMetrics(t *testing.T) {
	t.Parallel()
	src := &source{}
	src.set(metrics.AgentGauges{Name: "oncall", State: "sleeping", MemoryTokens: 321}, metrics.AgentGauges{Name: "demo", Standby: true, MemoryTokens: 99})
	m := metrics.New(testAgents(), src)
	ev := func(typ string, data map[string]any) events.Event {
		return events.Event{Time: t0, Agent: "oncall", Type: typ, Data: data}
	}
	observe(t, m,
		ev(events.MemoryCompacted, map[string]any{"turns": 1, "cost_usd": 0.25}),
		ev(events.MemoryCompacted, map[string]any{"turns": 2, "cost_usd": 0.5}),
		ev(events.MemoryCompactionFailed, map[string]any{"error": "boom"}),
		ev(events.MemoryCompactionSkipped, map[string]any{"reason": driver.SkipHalted}),
		ev(events.MemoryTurnsDropped, map[string]any{"count": 3}),
	)
	got := series(t, m.Registry())
	expect(t, got, map[string]float64{
		`agent_worker_memory_compactions_total{agent="oncall",outcome="completed"}`: 2,
		`agent_worker_memory_compactions_total{agent="oncall",outcome="failed"}`:    1,
		`agent_worker_memory_compactions_total{agent="oncall",outcome="skipped"}`:   1,
		`agent_worker_memory_compactions_total{agent="demo",outcome="completed"}`:   0,
		`agent_worker_memory_cost_usd_total{agent="oncall"}`:                        0.75,
		`agent_worker_memory_turns_dropped_total{agent="oncall"}`:                   3,
		`agent_worker_memory_tokens{agent="oncall"}`:                                321,
	})
	if _, ok := got[`agent_worker_memory_tokens{agent="demo"}`]; ok {
		t.Error("a standby reported the memory size of an agent it does not own")
	}
}
