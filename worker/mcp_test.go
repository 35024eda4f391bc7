package worker

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/agent-worker/agent-worker/internal/mcptest"
)

// An MCP server that is down leaves the worker ready: /readyz answers 200
// and names it, agent_worker_mcp_server_up is 0 for it and 1 for the one
// that is up, and the agent's turn still completes, the down server's
// tool answering with a tool error.
func TestADownMCPServerLeavesTheWorkerReady(t *testing.T) {
	t.Parallel()
	live := mcptest.Serve(t, mcptest.Echo()) // before the worker: it closes after the worker's stop
	dead := mcptest.DeadURL(t)
	cfg := writeConfig(t, setup{
		top:    fmt.Sprintf("mcp_servers:\n  live: {url: %q}\n  gone: {url: %q, timeout: 2s}", live, dead),
		agent:  "    mcp: [{server: live, tools: [echo]}, {server: gone, tools: [lookup]}]",
		script: `[{call: {name: lookup, args: {}}}, {call: {name: echo, args: {text: hi}}}, {text: done}]`,
	})
	r := start(t, cfg, newRecorder(), nil)
	waitFor(t, "live up and gone down in the metrics", func() bool {
		m := metricSeries(t, r.w)
		return m[`agent_worker_mcp_server_up{server="live"}`] == 1 && m[`agent_worker_mcp_server_up{server="gone"}`] == 0
	})
	resp, err := http.Get("http://" + r.w.APIAddr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Status   string   `json:"status"`
		Degraded []string `json:"degraded"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(body.Degraded) != 1 || !strings.Contains(body.Degraded[0], "MCP server gone down") {
		t.Fatalf("/readyz %d %+v", resp.StatusCode, body)
	}
	if err := r.nc.Publish("agents.triage.inbox", []byte("look it up")); err != nil {
		t.Fatal(err)
	}
	outcomes := map[string]any{}
	for len(outcomes) < 2 {
		e := r.waitEvent("tool-call")
		outcomes[fmt.Sprint(e.Data["tool"])] = e.Data["outcome"]
	}
	r.waitEvent("turn-completed")
	if outcomes["lookup"] != "error" || outcomes["echo"] != "ok" {
		t.Fatalf("tool calls %v: want the down server's lookup an error, the live server's echo ok", outcomes)
	}
}
