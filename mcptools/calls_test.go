package mcptools_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/internal/mcptest"
	"github.com/agent-worker/agent-worker/mcptools"
)

func webServer(t *testing.T, c *calls, timeout time.Duration) *mcptools.Servers {
	t.Helper()
	s := start(t, map[string]config.MCPServer{"web": {URL: httpServer(t, c) + "/", ToolPrefix: "web_",
		Timeout: config.Duration(timeout), MaxResultBytes: 1000}})
	waitUp(t, s, "web", nil)
	return s
}

// A scripted model calls an allowed tool of a real MCP server (streamable
// HTTP): the server is called once and the next model request carries
// its result; the model was offered only the granted tools, under the
// server's prefix.
func TestAnAllowedToolsResultReachesTheModel(t *testing.T) {
	t.Parallel()
	c := &calls{}
	s := webServer(t, c, 10*time.Second)
	r := newAgent(t, s, []config.AgentMCP{{Server: "web", Tools: []string{"echo", "big"}}},
		[]config.ScriptStep{step("web_echo", map[string]any{"text": "hi"}), {Text: "done"}})
	r.turn(t)
	if got := r.toolResult(t, "web_echo"); got["output"] != "echo: hi" {
		t.Fatalf("result %v", got)
	}
	if c.of("echo") != 1 {
		t.Fatalf("echo called %d times", c.of("echo"))
	}
	if got := r.declared(); len(got) != 2 || !slices.Contains(got, "web_echo") || !slices.Contains(got, "web_big") {
		t.Fatalf("offered %q, want web_echo and web_big", got)
	}
}

// A call of a tool the agent was not granted never reaches the server:
// the model is told the tool does not exist.
func TestAToolOutsideTheGrantsNeverReachesTheServer(t *testing.T) {
	t.Parallel()
	c := &calls{}
	s := webServer(t, c, 10*time.Second)
	r := newAgent(t, s, []config.AgentMCP{{Server: "web", Tools: []string{"echo"}}},
		[]config.ScriptStep{step("web_secret", nil), {Text: "done"}})
	r.turn(t)
	if got := r.toolResult(t, "web_secret"); !strings.Contains(got["error"].(string), "not found") {
		t.Fatalf("result %v", got)
	}
	if n := c.of("secret"); n != 0 {
		t.Fatalf("the server got %d calls of a tool not granted", n)
	}
}

// A tool slower than the server's timeout is a tool error for the model;
// the turn completes. A result above max_result_bytes is clipped and
// says so.
func TestSlowAndLargeResultsAreBounded(t *testing.T) {
	t.Parallel()
	c := &calls{}
	s := webServer(t, c, 300*time.Millisecond)
	r := newAgent(t, s, []config.AgentMCP{{Server: "web", Tools: []string{"*"}}},
		[]config.ScriptStep{step("web_slow", nil), step("web_big", nil), {Text: "done"}})
	r.turn(t)
	if got := r.toolResult(t, "web_slow"); !strings.Contains(got["error"].(string), "did not answer within 300ms") {
		t.Fatalf("slow result %v", got)
	}
	big := r.toolResult(t, "web_big")
	if out, _ := big["output"].(string); len(out) > 1004 || !strings.Contains(big["clipped"].(string), "100000") {
		t.Fatalf("big result: %d bytes, clipped %v", len(out), big["clipped"])
	}
}

// A stdio server (this test binary) killed mid-run: calls in the gap are
// tool errors saying the server is unavailable; the worker restarts it
// and the next call works, on a new process.
func TestAKilledStdioServerIsRestarted(t *testing.T) {
	t.Parallel()
	s, err := mcptools.Start(map[string]config.MCPServer{"local": {Command: []string{os.Args[0], "-test.run=^$"},
		Env: map[string]string{stdioEnv: "1"}, Timeout: config.Duration(10 * time.Second), MaxResultBytes: 1000}},
		mcptools.Options{FirstRetry: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	first := waitUp(t, s, "local", nil)
	r := newAgent(t, s, []config.AgentMCP{{Server: "local", Tools: []string{"pid"}}},
		[]config.ScriptStep{step("pid", nil), {Text: "done"}})
	r.turn(t)
	pid, err := strconv.Atoi(output(t, r.toolResult(t, "pid")))
	if err != nil || pid == os.Getpid() {
		t.Fatalf("pid %d %v", pid, err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitDown(t, s, "local")
	r.turn(t)
	if got := r.toolResult(t, "pid"); !strings.Contains(got["error"].(string), "MCP server unavailable") {
		t.Fatalf("a call while the server was down: %v", got)
	}
	waitUp(t, s, "local", func(st mcptools.Status) bool { return !st.Since.After(first.Since) })
	r.turn(t)
	again, err := strconv.Atoi(output(t, r.toolResult(t, "pid")))
	if err != nil || again == pid {
		t.Fatalf("after the restart: pid %d (was %d) %v", again, pid, err)
	}
}

func waitDown(t *testing.T, s *mcptools.Servers, name string) {
	t.Helper()
	end := time.Now().Add(deadline)
	for time.Now().Before(end) {
		for _, st := range s.Down() {
			if st.Server == name {
				return
			}
		}
		<-time.After(10 * time.Millisecond)
	}
	t.Fatalf("server %s never down", name)
}

// output is a tool result's text output.
func output(t *testing.T, res map[string]any) string {
	t.Helper()
	s, ok := res["output"].(string)
	if !ok {
		t.Fatalf("no text output: %v", res)
	}
	return s
}

// The headers of headers_env and headers_file go with every request to a
// url server; a server that refuses the connection without them is up
// with them.
func TestHeadersReachTheServer(t *testing.T) {
	t.Setenv("MCPTOOLS_TEST_TOKEN", "Bearer s3cret")
	file := filepath.Join(t.TempDir(), "tenant")
	if err := os.WriteFile(file, []byte("blue\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newServer(&calls{}) }, nil)
	var refused atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" || r.Header.Get("X-Tenant") != "blue" {
			refused.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	s := start(t, map[string]config.MCPServer{"auth": {URL: hs.URL, Timeout: config.Duration(5 * time.Second),
		HeadersEnv: map[string]string{"Authorization": "MCPTOOLS_TEST_TOKEN"}, HeadersFile: map[string]string{"X-Tenant": file}}})
	if st := waitUp(t, s, "auth", nil); !slices.Contains(st.Tools, "echo") {
		t.Fatalf("tools %v", st.Tools)
	}
	if n := refused.Load(); n != 0 {
		t.Fatalf("%d requests went without the headers", n)
	}
	if _, err := mcptools.Start(map[string]config.MCPServer{"x": {URL: hs.URL, HeadersEnv: map[string]string{"Authorization": "MCPTOOLS_TEST_UNSET"}}}, mcptools.Options{}); err == nil || !strings.Contains(err.Error(), "MCPTOOLS_TEST_UNSET is not set") {
		t.Fatalf("a header from an unset variable: %v", err)
	}
}

// A command server's stderr goes to the worker's log, a line at a time,
// with the server's name.
func TestAStdioServersStderrIsLogged(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	s, err := mcptools.Start(map[string]config.MCPServer{"local": {Command: []string{os.Args[0], "-test.run=^$"},
		Env: map[string]string{stdioEnv: "1"}, Timeout: config.Duration(10 * time.Second)}}, mcptools.Options{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	waitUp(t, s, "local", nil)
	end := time.Now().Add(deadline)
	for !strings.Contains(buf.String(), `"mcp_server":"local","line":"stdio test server starting"`) {
		if time.Now().After(end) {
			t.Fatalf("stderr not logged:\n%s", buf.String())
		}
		<-time.After(10 * time.Millisecond)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A server that adds a tool while connected is listed again: the agents'
// tool sets offer the new tool from their next model call.
func TestAServersNewToolIsOffered(t *testing.T) {
	t.Parallel()
	srv := newServer(&calls{})
	s := start(t, map[string]config.MCPServer{"web": {URL: mcptest.Serve(t, srv), Timeout: config.Duration(5 * time.Second)}})
	waitUp(t, s, "web", nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "fresh", Description: "Added later."}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "new"}}}, nil, nil
	})
	waitUp(t, s, "web", func(st mcptools.Status) bool { return !slices.Contains(st.Tools, "fresh") })
	r := newAgent(t, s, []config.AgentMCP{{Server: "web", Tools: []string{"fresh"}}}, []config.ScriptStep{step("fresh", nil), {Text: "done"}})
	r.turn(t)
	if got := output(t, r.toolResult(t, "fresh")); got != "new" {
		t.Fatalf("fresh: %q", got)
	}
}

// Two agents granted the same server share one connection: the server
// sees one session, and both agents' calls reach it.
func TestAgentsShareOneConnectionPerServer(t *testing.T) {
	t.Parallel()
	c := &calls{}
	srv := newServer(c)
	s := start(t, map[string]config.MCPServer{"web": {URL: mcptest.Serve(t, srv), Timeout: config.Duration(5 * time.Second)}})
	waitUp(t, s, "web", nil)
	one := newAgent(t, s, []config.AgentMCP{{Server: "web", Tools: []string{"echo"}}}, []config.ScriptStep{step("echo", map[string]any{"text": "a"}), {Text: "done"}})
	two := newAgent(t, s, []config.AgentMCP{{Server: "web", Tools: []string{"echo"}}}, []config.ScriptStep{step("echo", map[string]any{"text": "b"}), {Text: "done"}})
	one.turn(t)
	two.turn(t)
	if c.of("echo") != 2 {
		t.Fatalf("echo called %d times, want 2", c.of("echo"))
	}
	sessions := 0
	for range srv.Sessions() {
		sessions++
	}
	if sessions != 1 {
		t.Fatalf("the server has %d sessions, want 1 shared by both agents", sessions)
	}
}
