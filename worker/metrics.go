package worker

import (
	"context"
	"slices"
	"time"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/metrics"
)

// initMetrics makes the Prometheus metrics and has them observe the bus.
func (w *Worker) initMetrics(s *starting) error {
	cfg := s.cfg
	var infos []metrics.AgentInfo
	for i, a := range cfg.Agents {
		infos = append(infos, w.metricInfo(cfg, a, s.specs[i]))
	}
	w.metrics = metrics.NewWith(infos, gauges{w},
		metrics.Options{PerAgent: metrics.PerAgent(cfg.Metrics.PerAgent)})
	w.storeOps.Store(w.metrics)
	w.metrics.SetConfigHash(ConfigHash(cfg))
	w.stopMetrics = w.metrics.Observe(w.bus)
	return nil
}

// metricTools are the tool labels of a's tool_calls_total: its built-in
// tools and the MCP tools it is granted by name (as the model sees them);
// a "*" grant's tools are counted as "other", so the labels stay bounded
// by the config, not by what a server lists.
func metricTools(cfg *config.Config, a config.Agent) []string {
	out := slices.Clone(a.Tools)
	for _, g := range a.MCP {
		for _, t := range g.Tools {
			if t != "*" {
				out = append(out, config.ModelToolName(cfg.MCPServers[g.Server].ToolPrefix, t))
			}
		}
	}
	return out
}

// gauges reads the driver's agents for the metrics' scrape-time gauges:
// every agent's ownership, and the other per-agent gauges of the agents
// this replica owns only (metrics.AgentGauges.Standby), so that summed
// over the replicas each agent counts once.
type gauges struct{ w *Worker }

// Replicas implements metrics.ReplicaSource.
func (g gauges) Replicas() int { return g.w.spread.Replicas() }

// ReadAhead implements metrics.ReadAheadSource: the input log's window.
func (g gauges) ReadAhead() (int64, uint64, uint64, bool) {
	if g.w.binding == nil || g.w.conn.JS == nil {
		return 0, 0, 0, false
	}
	held, window, stream := g.w.binding.ReadAhead()
	return held, window, stream, true
}

// DeadLettersStored implements metrics.DeadLetterSource: the dead-letter
// stream's message count, asked within a second.
func (g gauges) DeadLettersStored() (uint64, bool) {
	if g.w.deadLetters == nil {
		return 0, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	n, err := g.w.deadLetters.Stored(ctx)
	return n, err == nil
}

// MCPServersUp implements metrics.MCPSource.
func (g gauges) MCPServersUp() map[string]bool {
	if g.w.mcp == nil {
		return nil
	}
	up := map[string]bool{}
	for _, st := range g.w.mcp.Status() {
		up[st.Server] = st.Up
	}
	return up
}

// MCPStartWaits implements metrics.MCPStartWaitSource.
func (g gauges) MCPStartWaits() map[string]map[string]uint64 {
	if g.w.mcp == nil {
		return nil
	}
	return g.w.mcp.StartWaits()
}

// LedgerWriteFailures implements metrics.LedgerSource.
func (g gauges) LedgerWriteFailures() uint64 {
	if g.w.guard == nil {
		return 0
	}
	return g.w.guard.WriteFailures()
}

// LedgersUnstored implements metrics.LedgerSource.
func (g gauges) LedgersUnstored() int {
	if g.w.guard == nil {
		return 0
	}
	return len(g.w.guard.Unstored())
}

func (g gauges) Dependencies() []metrics.Dependency {
	var out []metrics.Dependency
	for _, s := range g.w.health.Statuses() {
		out = append(out, metrics.Dependency{Name: s.Name, Up: s.Err == nil})
	}
	return out
}

func (g gauges) Gauges() []metrics.AgentGauges {
	var out []metrics.AgentGauges
	d := g.w.driver
	for _, a := range d.Agents() {
		st := a.Status()
		next := map[string]time.Time{}
		for _, s := range a.Schedules() {
			next[s] = d.Scheduler().Next(a.Name(), s)
		}
		ag := metrics.AgentGauges{Name: a.Name(), Standby: st.Standby, State: string(st.State), InboxPending: st.InboxPending + st.Deferred,
			SubagentsRunning: g.w.subagents.Running(a.Name()), NextSchedule: next, MemoryTokens: a.MemoryTokens()}
		if gs, ok := g.w.guard.Status(a.Name()); ok && !st.Standby {
			ag.Spend = []metrics.WindowSpend{{Window: "turn", Spent: gs.Turn.SpentUSD, Ceiling: gs.Turn.CeilingUSD},
				{Window: "session", Spent: gs.Session.SpentUSD, Ceiling: gs.Session.CeilingUSD},
				{Window: "day", Spent: gs.Daily.SpentUSD, Ceiling: gs.Daily.CeilingUSD}}
		}
		out = append(out, ag)
	}
	return out
}
