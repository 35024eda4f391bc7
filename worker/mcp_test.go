package worker

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agent-worker/agent-worker/internal/mcptest"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// An MCP server that is down leaves the worker ready: /readyz answers 200
// and names it, agent_worker_mcp_server_up is 0 for it and 1 for the one
// that is up, and the agent's turn still completes, the down server's
// tool answering with a tool error.
func TestADownMCPServerLeavesTheWorkerReady(t *testing.T) {
	t.Parallel()
	echo, _ := mcptest.Echo()
	live := mcptest.Serve(t, echo) // before the worker: it closes after the worker's stop
	dead := mcptest.DeadURL(t)
	cfg := writeConfig(t, setup{
		top:    fmt.Sprintf("mcp_servers:\n  live: {url: %q}\n  gone: {url: %q, timeout: 2s}", live, dead),
		agent:  "    mcp: [{server: live, tools: [echo]}, {server: gone, tools: [lookup]}]",
		script: `[{call: {name: lookup, args: {}}}, {call: {name: echo, args: {text: hi}}}, {text: done}]`,
	})
	r := start(t, cfg, newRecorder(), nil)
	wait.Within(t, deadline, "live up and gone down in the metrics", func() bool {
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

// Approval end to end: a call of an MCP tool that needs an approval is
// held (the server is not called), announced and listed; it survives a
// restart of the worker; approved over the HTTP API, the server is called
// once with the stored arguments and the agent wakes with the result.
func TestAHeldMCPCallIsApprovedOverTheAPI(t *testing.T) {
	t.Parallel()
	echo, calls := mcptest.Echo()
	live := mcptest.Serve(t, echo)
	s := setup{
		top:    fmt.Sprintf("mcp_servers:\n  ops: {url: %q, tool_prefix: ops_}", live),
		agent:  "    mcp: [{server: ops, tools: [echo]}]\n    approval: [ops_echo]\n    approval_ttl: 1h",
		script: `[{call: {name: ops_echo, args: {text: restart api-7}}}, {text: asked}, {text: noted}]`,
	}
	s.dataDir = t.TempDir()
	rec := newRecorder()
	r := start(t, writeConfig(t, s), rec, nil)
	if err := r.nc.Publish("agents.triage.inbox", []byte("api-7 is stuck")); err != nil {
		t.Fatal(err)
	}
	held := r.waitEvent("approval-requested")
	r.waitEvent("turn-completed")
	if n := calls.Load(); n != 0 {
		t.Fatalf("the server got %d calls of a held tool", n)
	}
	id, _ := held.Data["id"].(string)
	r.stop() // the approval must outlive the process

	r2 := start(t, writeConfig(t, s), rec, nil)
	api := "http://" + r2.w.APIAddr()
	var pending []struct {
		ID   string         `json:"id"`
		Tool string         `json:"tool"`
		Args map[string]any `json:"args"`
	}
	wait.Within(t, deadline, "the pending approval listed after the restart", func() bool {
		resp, err := http.Get(api + "/v1/agents/triage/approvals")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&pending) == nil && len(pending) == 1
	})
	if pending[0].ID != id || pending[0].Tool != "ops_echo" || pending[0].Args["text"] != "restart api-7" {
		t.Fatalf("pending %+v, want %s", pending, id)
	}
	page, err := http.Get(api + "/")
	if err != nil {
		t.Fatal(err)
	}
	html, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if !strings.Contains(string(html), "awaiting approval: ops_echo") || !strings.Contains(string(html), id) {
		t.Fatalf("the status page does not show the pending approval:\n%s", html)
	}
	resp, err := http.Post(api+"/v1/agents/triage/approvals/"+id+"/approve", "application/json", strings.NewReader(`{"reason": "api-7 is down"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("approve: HTTP %d", resp.StatusCode)
	}
	if d := r2.waitEvent("approval-decided"); d.Data["decision"] != "approved" || d.Data["outcome"] != "ok" || d.Data["reason"] != "api-7 is down" {
		t.Fatalf("decided %v", d.Data)
	}
	r2.waitEvent("turn-completed")
	if n := calls.Load(); n != 1 {
		t.Fatalf("the server got %d calls after the approval, want 1", n)
	}
	if all := rec.all(); !strings.Contains(all, "approved your held call of ops_echo") || !strings.Contains(all, "echo: restart api-7") {
		t.Fatalf("the agent was not woken with the result:\n%s", all)
	}
	resp, err = http.Post(api+"/v1/agents/triage/approvals/"+id+"/approve", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("approving twice: HTTP %d, want 404", resp.StatusCode)
	}
}
