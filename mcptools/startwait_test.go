package mcptools_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/mcptools"
)

// waitsMsg and the outcomes' messages are what the log says of a turn's
// wait for a server's first connection.
const waitsMsg = "turn waits for the MCP server's first connection"

// gatedServer starts a stdio test server (this binary) that answers
// nothing until the file gate exists, with the given timeout, logging to
// buf; it does not retry within the test.
func gatedServer(t *testing.T, gate string, timeout time.Duration, buf *syncBuffer) *mcptools.Servers {
	t.Helper()
	s, err := mcptools.Start(map[string]config.MCPServer{"local": {Command: []string{os.Args[0], "-test.run=^$"},
		Env: map[string]string{stdioEnv: "1", gateEnv: gate}, Timeout: config.Duration(timeout)}},
		mcptools.Options{Log: slog.New(slog.NewJSONHandler(buf, nil)), FirstRetry: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// modelCalls returns how many model calls the agent made.
func (r *agentRig) modelCalls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

// A message sent 50 ms after start, while the agent's stdio MCP server is
// still connecting, waits for it: no model call is made until the server
// is up, and the model's call of the server's tool gets the tool's real
// answer, not "not connected yet".
func TestAMessageAtStartUsesTheStdioServersTool(t *testing.T) {
	t.Parallel()
	gate := filepath.Join(t.TempDir(), "open")
	var buf syncBuffer
	s := gatedServer(t, gate, deadline, &buf)
	r := newAgent(t, s, []config.AgentMCP{{Server: "local", Tools: []string{"echo"}}},
		[]config.ScriptStep{step("echo", map[string]any{"text": "hi"}), {Text: "done"}})
	<-time.After(50 * time.Millisecond) // the scenario: a message 50 ms after start, not a wait for something
	r.wake()
	end := time.Now().Add(deadline)
	for !strings.Contains(buf.String(), waitsMsg) {
		if r.a.Status().Turns > 0 || time.Now().After(end) {
			t.Fatalf("the turn did not wait for the connecting server (turns %d):\n%s", r.a.Status().Turns, buf.String())
		}
		<-time.After(5 * time.Millisecond)
	}
	if n := r.modelCalls(); n != 0 {
		t.Fatalf("%d model calls while the server was still connecting", n)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r.completed(t)
	if got := r.toolResult(t, "echo"); got["output"] != "echo: hi" {
		t.Fatalf("echo's result %v, want the server's answer", got)
	}
	if w := s.StartWaits()["local"]; w[mcptools.WaitConnected] != 1 || len(w) != 1 {
		t.Fatalf("start waits %v, want one that ended connected", w)
	}
}

// A server that never connects holds a turn at most its timeout: the
// turn then starts, the wait's end is logged and counted, and the
// server's tool answers the model with an error, as for any server that
// is down.
func TestAServerThatNeverConnectsHoldsATurnAtMostItsTimeout(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	s := gatedServer(t, filepath.Join(t.TempDir(), "never"), 300*time.Millisecond, &buf)
	r := newAgent(t, s, []config.AgentMCP{{Server: "local", Tools: []string{"echo"}}},
		[]config.ScriptStep{step("echo", map[string]any{"text": "hi"}), {Text: "done"}})
	r.turn(t)
	if msg, _ := r.toolResult(t, "echo")["error"].(string); !strings.Contains(msg, "MCP server unavailable") {
		t.Fatalf("echo's result %q, want a server-unavailable tool error", msg)
	}
	w := s.StartWaits()["local"]
	if w[mcptools.WaitTimeout]+w[mcptools.WaitFailed] != 1 || w[mcptools.WaitConnected] != 0 {
		t.Fatalf("start waits %v, want one that ended by the timeout or the failed attempt", w)
	}
	log := buf.String()
	if !strings.Contains(log, waitsMsg) || (!strings.Contains(log, "turn waited the MCP server's timeout") && !strings.Contains(log, "first connection failed")) {
		t.Fatalf("the wait and its end are not logged:\n%s", log)
	}
	// Its first attempt over, the server holds no turn again: its tool
	// answers with an error at once.
	end := time.Now().Add(deadline)
	for st := s.Status()[0]; strings.Contains(st.Error, "not connected yet"); st = s.Status()[0] {
		if time.Now().After(end) {
			t.Fatalf("the first attempt never ended: %+v", st)
		}
		<-time.After(10 * time.Millisecond)
	}
	r.turn(t)
	if got := s.StartWaits()["local"]; got[mcptools.WaitTimeout]+got[mcptools.WaitFailed] != 1 {
		t.Fatalf("start waits %v after the first attempt ended, want still the one", got)
	}
	if msg, _ := r.toolResult(t, "echo")["error"].(string); !strings.Contains(msg, "MCP server unavailable") {
		t.Fatalf("echo's result %q, want a server-unavailable tool error", msg)
	}
}
