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

// mcpMetrics is agent_worker_mcp_server_up{server}: one series per
// configured server (labels bounded by the config).
type mcpMetrics struct {
	up  *prometheus.Desc
	src Source
}

func newMCPMetrics(src Source) *mcpMetrics {
	return &mcpMetrics{src: src, up: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "mcp_server_up"),
		"1 while the worker is connected to the MCP server, 0 while it is down (its tools answer the model with a \"server unavailable\" tool error and the worker reconnects with backoff; /readyz lists it and stays 200).",
		[]string{"server"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *mcpMetrics) Describe(ch chan<- *prometheus.Desc) { ch <- c.up }

// Collect implements prometheus.Collector: nothing without an MCPSource.
func (c *mcpMetrics) Collect(ch chan<- prometheus.Metric) {
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
