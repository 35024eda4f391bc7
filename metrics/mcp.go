package metrics

import (
	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// MCPSource reports, at scrape time, the configured MCP servers and
// whether each is connected (agent_worker_mcp_server_up). It must not
// block.
type MCPSource interface {
	MCPServersUp() map[string]bool
}

// MCPStartWaitSource reports, at scrape time, how many times a turn
// waited for an MCP server's first connection before its first model
// call, by server and outcome (connected, failed, timeout, cancelled):
// agent_worker_mcp_start_waits_total. It must not block.
type MCPStartWaitSource interface {
	MCPStartWaits() map[string]map[string]uint64
}

// mcpMetrics is agent_worker_mcp_server_up{server} and
// agent_worker_mcp_start_waits_total{server,outcome}: series per
// configured server (labels bounded by the config and by the outcomes).
type mcpMetrics struct {
	up, waits *prometheus.Desc
	src       Source
}

func newMCPMetrics(src Source) *mcpMetrics {
	return &mcpMetrics{src: src, up: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "mcp_server_up"),
		"1 while the worker is connected to the MCP server, 0 while it is down (its tools answer the model with a \"server unavailable\" tool error and the worker reconnects with backoff; /readyz lists it and stays 200).",
		[]string{"server"}, nil),
		waits: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "mcp_start_waits_total"),
			"Turns that waited, before their first model call, for an MCP server's first connection (at start or after a reload added or changed it), by how the wait ended: connected, failed, timeout (the server's timeout passed first) or cancelled (the turn ended).",
			[]string{"server", "outcome"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *mcpMetrics) Describe(ch chan<- *prometheus.Desc) { ch <- c.up; ch <- c.waits }

// Collect implements prometheus.Collector: nothing without an MCPSource
// (or MCPStartWaitSource).
func (c *mcpMetrics) Collect(ch chan<- prometheus.Metric) {
	if ws, ok := c.src.(MCPStartWaitSource); ok {
		waits := ws.MCPStartWaits()
		for _, server := range slices.Sorted(maps.Keys(waits)) {
			for _, outcome := range slices.Sorted(maps.Keys(waits[server])) {
				ch <- prometheus.MustNewConstMetric(c.waits, prometheus.CounterValue, float64(waits[server][outcome]), server, outcome)
			}
		}
	}
	ms, ok := c.src.(MCPSource)
	if !ok {
		return
	}
	up := ms.MCPServersUp()
	for _, name := range slices.Sorted(maps.Keys(up)) {
		v := 0.0
		if up[name] {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, v, name)
	}
}
