package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/internal/mcptest"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// toolCalls waits for agent's next completed turn and returns the
// outcome of each tool it called, by tool ("echo" → "ok"); a failed turn
// fails the test.
func (r *running) toolCalls(agent string) map[string]string {
	r.t.Helper()
	out := map[string]string{}
	timeout := time.After(deadline)
	for {
		select {
		case e := <-r.sub.C:
			if e.Agent != agent {
				continue
			}
			switch e.Type {
			case "tool-call":
				out[fmt.Sprint(e.Data["tool"])] = fmt.Sprint(e.Data["outcome"])
			case events.TurnFailed:
				r.t.Fatalf("%s's turn failed: %v", agent, e.Data)
			case events.TurnCompleted:
				return out
			}
		case <-timeout:
			r.t.Fatalf("no turn of %s completed within %v", agent, deadline)
		}
	}
}

// reloadEvent waits for the config-reloaded event of agent.
func (r *running) reloadEvent(agent string) events.Event {
	r.t.Helper()
	for {
		if e := r.waitEvent(events.ConfigReloaded); e.Agent == agent {
			return e
		}
	}
}

// MCP servers follow the config: a reload adds a server and grants it to
// triage, whose next turn calls its tool there; a reload changes only the
// server's URL (triage itself unchanged: its tool set follows the server
// by name), and the next call reaches the new server; a reload removes
// the server and the grant, and triage's turns call no server any more.
// Through all of it ops, granted another server that never changes,
// keeps calling it without an error; a reload that removes a server an
// agent is still granted is refused, changing nothing.
func TestReloadAddsChangesAndRemovesAnMCPServer(t *testing.T) {
	t.Parallel()
	echoA, callsA := mcptest.Echo()
	echoB, callsB := mcptest.Echo()
	echoK, callsK := mcptest.Echo()
	urlA, urlB, urlK := mcptest.Serve(t, echoA), mcptest.Serve(t, echoB), mcptest.Serve(t, echoK)
	s := setup{dataDir: t.TempDir(), script: `[{call: {name: echo, args: {text: hi}}}, {text: done}]`}
	version := func(servers, triageGrant string) setup {
		v := s
		// After the agents: the models' lines stay put (a model's line is
		// part of its definition).
		v.agent = triageGrant + "  - name: ops\n    model: fake\n    tools: [report_done]\n    mcp: [{server: keep, tools: [echo]}]\n" +
			"mcp_servers:\n  keep: {url: " + fmt.Sprintf("%q", urlK) + "}\n" + servers
		return v
	}
	r := start(t, writeConfig(t, version("", "")), newRecorder(), nil)
	wait.Within(t, deadline, "both agents owned", func() bool { return r.w.Leases().Held("triage") && r.w.Leases().Held("ops") })
	opsWorks := func(step string) {
		t.Helper()
		before := callsK.Load()
		r.publish("agents.ops.inbox", "check "+step)
		if got := r.toolCalls("ops"); got["echo"] != "ok" || callsK.Load() != before+1 {
			t.Fatalf("%s: ops's tool calls %v, keep got %d calls (want %d)", step, got, callsK.Load(), before+1)
		}
	}
	opsWorks("at start")

	// Added, and granted to triage (a changed agent).
	grant := "    mcp: [{server: tools, tools: [echo]}]\n"
	ch, err := r.w.Reload(context.Background(), writeConfig(t, version(fmt.Sprintf("  tools: {url: %q}\n", urlA), grant)), "test")
	if err != nil || fmt.Sprint(ch.MCPServers.Added) != "[tools]" || fmt.Sprint(ch.Changed) != "[triage]" {
		t.Fatalf("reload adding the server: %+v %v", ch, err)
	}
	if e := r.reloadEvent("triage"); fmt.Sprint(e.Data["mcp_servers"]) != "map[added:[tools] changed:[] removed:[]]" {
		t.Fatalf("config-reloaded event %v", e.Data)
	}
	r.publish("agents.triage.inbox", "look")
	if got := r.toolCalls("triage"); got["echo"] != "ok" || callsA.Load() != 1 {
		t.Fatalf("after the add: triage's tool calls %v, server A %d calls", got, callsA.Load())
	}
	wait.Within(t, deadline, "triage's echo counted under its own label", func() bool {
		return metricSeries(t, r.w)[`agent_worker_tool_calls_total{agent="triage",outcome="ok",tool="echo"}`] == 1
	})
	opsWorks("after the add")

	// Changed: only its URL; triage is not changed by this reload.
	ch, err = r.w.Reload(context.Background(), writeConfig(t, version(fmt.Sprintf("  tools: {url: %q}\n", urlB), grant)), "test")
	if err != nil || fmt.Sprint(ch.MCPServers.Changed) != "[tools]" || len(ch.Changed) != 0 {
		t.Fatalf("reload changing the server: %+v %v", ch, err)
	}
	r.publish("agents.triage.inbox", "look again")
	if got := r.toolCalls("triage"); got["echo"] != "ok" || callsB.Load() != 1 || callsA.Load() != 1 {
		t.Fatalf("after the change: triage's tool calls %v, server A %d calls (want 1), B %d (want 1)", got, callsA.Load(), callsB.Load())
	}
	opsWorks("after the change")

	// Refused: the server removed while triage is still granted it
	// (config validation: a grant names a configured server).
	bad := writeConfig(t, version(fmt.Sprintf("  tools: {url: %q}\n", urlB), grant))
	delete(bad.MCPServers, "tools")
	_, err = r.w.Reload(context.Background(), bad, "test")
	var refusal *ReloadRefusal
	if !errors.As(err, &refusal) || !errors.Is(err, ErrConfigInvalid) || !strings.Contains(strings.Join(refusal.Problems, "\n"), `unknown MCP server "tools"`) {
		t.Fatalf("removing a granted server: %v", err)
	}
	if _, ok := r.w.Config().MCPServers["tools"]; !ok {
		t.Fatal("the refused reload changed the config in force")
	}
	opsWorks("after the refusal")

	// Removed, with the grant.
	ch, err = r.w.Reload(context.Background(), writeConfig(t, version("", "")), "test")
	if err != nil || fmt.Sprint(ch.MCPServers.Removed) != "[tools]" || fmt.Sprint(ch.Changed) != "[triage]" {
		t.Fatalf("reload removing the server: %+v %v", ch, err)
	}
	r.publish("agents.triage.inbox", "and again")
	if got := r.toolCalls("triage"); got["echo"] == "ok" || callsA.Load() != 1 || callsB.Load() != 1 {
		t.Fatalf("after the removal: triage's tool calls %v, server A %d calls, B %d (want 1 each)", got, callsA.Load(), callsB.Load())
	}
	opsWorks("after the removal")
	wait.Within(t, deadline, "the removed server gone from the metrics", func() bool {
		m := metricSeries(t, r.w)
		_, there := m[`agent_worker_mcp_server_up{server="tools"}`]
		return !there && m[`agent_worker_mcp_server_up{server="keep"}`] == 1
	})
}
