package metrics

import "github.com/prometheus/client_golang/prometheus"

// PerAgent selects how many per-agent series a worker exposes
// (metrics.per_agent in the config).
type PerAgent string

const (
	// PerAgentAuto is PerAgentFull up to AutoFullMaxAgents agents and
	// PerAgentLazy above. The zero value means the same.
	PerAgentAuto PerAgent = "auto"
	// PerAgentFull creates every counter series of the fixed label sets
	// at 0 for every agent, and keeps turn_duration_seconds and
	// wake_latency_seconds per agent: rate() and increase() see an
	// agent's first event. About 140 series (10 KB of exposition) an
	// agent with three tools and two schedules.
	PerAgentFull PerAgent = "full"
	// PerAgentLazy creates a per-agent counter series with its first
	// event (no series at 0), reports turn_duration_seconds and
	// wake_latency_seconds once per worker (no agent label), and of the
	// per-agent gauges only the current agent_state (1), inbox_pending,
	// agent_owned, the next schedule runs, and subagents_running and
	// memory_tokens when not 0. An idle agent costs about five series.
	PerAgentLazy PerAgent = "lazy"
)

// AutoFullMaxAgents is the largest number of agents PerAgentAuto exposes
// in full: at 100 agents a full scrape is about 1 MB.
const AutoFullMaxAgents = 100

// PerAgentModes are the values metrics.per_agent accepts.
var PerAgentModes = []string{string(PerAgentAuto), string(PerAgentFull), string(PerAgentLazy)}

// Options are the choices New leaves at their defaults.
type Options struct {
	// PerAgent is the per-agent series mode; "" is PerAgentAuto.
	PerAgent PerAgent
}

// resolve returns the mode for n agents: full or lazy.
func (p PerAgent) resolve(n int) PerAgent {
	switch p {
	case PerAgentFull, PerAgentLazy:
		return p
	}
	if n > AutoFullMaxAgents {
		return PerAgentLazy
	}
	return PerAgentFull
}

// PerAgent returns the mode m runs in: PerAgentFull or PerAgentLazy.
func (m *Metrics) PerAgent() PerAgent {
	if m.lazy {
		return PerAgentLazy
	}
	return PerAgentFull
}

// agentLabels is the label set of the per-agent histograms: agent in
// full mode, none (one histogram per worker) in lazy mode.
func agentLabels(lazy bool) []string {
	if lazy {
		return nil
	}
	return []string{"agent"}
}

// agentObserver returns agent's series of a per-agent histogram, or the
// worker's one in lazy mode.
func (m *Metrics) agentObserver(h *prometheus.HistogramVec, agent string) prometheus.Observer {
	if m.lazy {
		return h.WithLabelValues()
	}
	return h.WithLabelValues(agent)
}
