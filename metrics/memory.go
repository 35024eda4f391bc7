package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agent-worker/agent-worker/events"
)

// memoryOutcomes are the outcome label values of
// memory_compactions_total: the driver's memory-compacted (completed),
// memory-compaction-failed (failed) and memory-compaction-skipped
// (skipped) events.
var memoryOutcomes = []string{"completed", "failed", "skipped"}

// memoryMetrics count what the agents' running memories do (the driver's
// memory-* events); the memory's size is a scrape-time gauge
// (AgentGauges.MemoryTokens).
type memoryMetrics struct {
	compactions *prometheus.CounterVec
	cost        *prometheus.CounterVec
	dropped     *prometheus.CounterVec
}

func newMemoryMetrics() memoryMetrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
	}
	return memoryMetrics{
		compactions: counter("memory_compactions_total",
			"Folds of turns that left the history window into the agent's running memory, by outcome: completed, failed (the turns stay; retried after a backoff), skipped (a due fold waits: the agent is halted or paused, a guardrail refused it, a dependency is down; counted once per reason until a fold runs).",
			"agent", "outcome"),
		cost: counter("memory_cost_usd_total",
			"Spend on memory folds in US dollars, priced like any model call and charged to the agent's guardrails (also in the ledger's session and daily spend).",
			"agent"),
		dropped: counter("memory_turns_dropped_total",
			"Turns deleted from the history before they were folded into the memory: folds failed for longer than the store holds turns (64 per agent, the window included).",
			"agent"),
	}
}

func (mm memoryMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{mm.compactions, mm.cost, mm.dropped}
}

func (mm memoryMetrics) precreate(agent string) {
	for _, o := range memoryOutcomes {
		mm.compactions.WithLabelValues(agent, o)
	}
	mm.cost.WithLabelValues(agent)
	mm.dropped.WithLabelValues(agent)
}

// record counts one memory event of a configured agent.
func (mm memoryMetrics) record(e events.Event) {
	switch e.Type {
	case events.MemoryCompacted:
		mm.compactions.WithLabelValues(e.Agent, "completed").Inc()
		addPositive(mm.cost, e.Data["cost_usd"], e.Agent)
	case events.MemoryCompactionFailed:
		mm.compactions.WithLabelValues(e.Agent, "failed").Inc()
	case events.MemoryCompactionSkipped:
		mm.compactions.WithLabelValues(e.Agent, "skipped").Inc()
	case events.MemoryTurnsDropped:
		addPositive(mm.dropped, e.Data["count"], e.Agent)
	}
}
