package metrics_test

import (
	"testing"

	"github.com/agent-worker/agent-worker/metrics"
)

// mcpWaits is a Source that also reports MCP start waits.
type mcpWaits struct {
	source
	waits map[string]map[string]uint64
}

func (s *mcpWaits) MCPStartWaits() map[string]map[string]uint64 { return s.waits }

// The turns' waits for MCP servers' first connections are a counter per
// server and outcome, read from the source at scrape time.
func TestMCPStartWaitsAreCountedPerServerAndOutcome(t *testing.T) {
	t.Parallel()
	src := &mcpWaits{waits: map[string]map[string]uint64{"local": {"connected": 2, "timeout": 1}, "prom": {"failed": 3}}}
	m := metrics.New(testAgents(), src)
	got := family(series(t, m.Registry()), "agent_worker_mcp_start_waits_total")
	want := map[string]float64{
		`agent_worker_mcp_start_waits_total{outcome="connected",server="local"}`: 2,
		`agent_worker_mcp_start_waits_total{outcome="timeout",server="local"}`:   1,
		`agent_worker_mcp_start_waits_total{outcome="failed",server="prom"}`:     3,
	}
	if len(got) != len(want) {
		t.Fatalf("series %v, want %v", got, want)
	}
	expect(t, got, want)
}
