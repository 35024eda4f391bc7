package mcptools_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/internal/mcptest"
	"github.com/agent-worker/agent-worker/mcptools"
)

// named is a real MCP server whose tools say which server answered: who
// answers its name; hold tells started and answers "<name> held" once
// release is closed (an error if the client goes away first).
type named struct {
	srv      *mcp.Server
	url      string
	started  chan struct{}
	release  chan struct{}
	whoCalls atomic.Int64
	freed    sync.Once
}

// free lets every hold call answer.
func (n *named) free() { n.freed.Do(func() { close(n.release) }) }

func serveNamed(t *testing.T, name string) *named {
	t.Helper()
	n := &named{srv: mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, nil),
		started: make(chan struct{}, 10), release: make(chan struct{})}
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	mcp.AddTool(n.srv, &mcp.Tool{Name: "who", Description: "Which server answers."}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		n.whoCalls.Add(1)
		return text(name), nil, nil
	})
	mcp.AddTool(n.srv, &mcp.Tool{Name: "hold", Description: "Answers once released."}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		n.started <- struct{}{}
		select {
		case <-n.release:
			return text(name + " held"), nil, nil
		case <-ctx.Done(): // the client went away mid-call
			return nil, nil, ctx.Err()
		}
	})
	n.url = mcptest.Serve(t, n.srv)
	return n
}

// at is a server config for url (the config's defaults are not applied
// here).
func at(url string) config.MCPServer {
	return config.MCPServer{URL: url, Timeout: config.Duration(10 * time.Second)}
}

// sessions counts the server's open sessions.
func (n *named) sessions() int {
	c := 0
	for range n.srv.Sessions() {
		c++
	}
	return c
}

// reload plans next and applies it whole, as the worker's reload does.
func reload(t *testing.T, s *mcptools.Servers, next map[string]config.MCPServer) *mcptools.Plan {
	t.Helper()
	p, err := s.Plan(next)
	if err != nil {
		t.Fatal(err)
	}
	if late := p.Connect(t.Context()); len(late) > 0 {
		t.Fatalf("servers %v not up after the reload: %+v", late, s.Status())
	}
	p.Retire()
	return p
}

func waitCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-time.After(5 * time.Millisecond)
	}
}

// A reload that changes a server's URL while one of its calls runs: the
// running call ends on the old connection with the old server's answer;
// the same turn's next call, and the next turn's, reach the new server;
// the old connection is closed once its call has ended, not before.
func TestAChangedServersRunningCallEndsOnTheOldConnection(t *testing.T) {
	t.Parallel()
	a, b := serveNamed(t, "A"), serveNamed(t, "B")
	s := start(t, map[string]config.MCPServer{"ops": at(a.url)})
	waitUp(t, s, "ops", nil)
	g := newAgent(t, s, []config.AgentMCP{{Server: "ops", Tools: []string{"hold", "who"}}},
		[]config.ScriptStep{step("hold", nil), step("who", nil), {Text: "done"}})
	t.Cleanup(a.free) // before the agent's shutdown, which waits for the call

	g.wake()
	select {
	case <-a.started:
	case <-time.After(deadline):
		t.Fatal("hold never reached server A")
	}
	p := reload(t, s, map[string]config.MCPServer{"ops": at(b.url)})
	if !slices.Equal(p.Changed, []string{"ops"}) || len(p.Added)+len(p.Removed) != 0 {
		t.Fatalf("plan %+v, want ops changed", p)
	}
	if a.sessions() != 1 {
		t.Fatalf("the old connection closed while its call ran (A has %d sessions)", a.sessions())
	}
	a.free()
	g.completed(t)
	if got := output(t, g.toolResult(t, "hold")); got != "A held" {
		t.Fatalf("the running call answered %q, want A's", got)
	}
	if got := output(t, g.toolResult(t, "who")); got != "B" {
		t.Fatalf("the call after the reload answered %q, want B", got)
	}
	waitCond(t, "the old connection to close after its call ended", func() bool { return a.sessions() == 0 })
	if st := s.Status(); len(st) != 1 || st[0].Server != "ops" || !st[0].Up {
		t.Fatalf("status %+v", st)
	}
	if a.whoCalls.Load() != 0 {
		t.Fatalf("A got %d who calls after it was replaced", a.whoCalls.Load())
	}
}

// A turn that listed a server's tools before the reload swapped the
// server calls one after: the call reaches the new server, not the old.
func TestACallListedBeforeTheSwapReachesTheNewServer(t *testing.T) {
	t.Parallel()
	a, b := serveNamed(t, "A"), serveNamed(t, "B")
	s := start(t, map[string]config.MCPServer{"ops": at(a.url)})
	waitUp(t, s, "ops", nil)
	g := newAgent(t, s, []config.AgentMCP{{Server: "ops", Tools: []string{"who"}}},
		[]config.ScriptStep{step("who", nil), {Text: "done"}})
	g.armed.Store(true)
	g.wake()
	<-g.entered // the tools are listed: the model is about to call who
	reload(t, s, map[string]config.MCPServer{"ops": at(b.url)})
	close(g.release)
	g.completed(t)
	if got := output(t, g.toolResult(t, "who")); got != "B" {
		t.Fatalf("who answered %q, want B", got)
	}
	if a.whoCalls.Load() != 0 || b.whoCalls.Load() != 1 {
		t.Fatalf("who calls: A %d, B %d", a.whoCalls.Load(), b.whoCalls.Load())
	}
}

// A server added by a reload is offered to an agent granted it from the
// agent's next turn (the tool set follows the server by name); a server
// removed by a reload is disconnected, leaves the status, and a call
// through a tool listed before the removal is a tool error that says so,
// not a call to the server.
func TestAServerAddedAndRemovedByReload(t *testing.T) {
	t.Parallel()
	a := serveNamed(t, "A")
	s := start(t, nil)
	g := newAgent(t, s, []config.AgentMCP{{Server: "ops", Tools: []string{"who"}}},
		[]config.ScriptStep{step("who", nil), {Text: "done"}})

	p := reload(t, s, map[string]config.MCPServer{"ops": at(a.url)})
	if !slices.Equal(p.Added, []string{"ops"}) {
		t.Fatalf("plan %+v, want ops added", p)
	}
	g.wake()
	g.completed(t)
	if got := output(t, g.toolResult(t, "who")); got != "A" {
		t.Fatalf("who answered %q, want A", got)
	}

	g.armed.Store(true)
	g.wake()
	<-g.entered
	p = reload(t, s, nil)
	if !slices.Equal(p.Removed, []string{"ops"}) {
		t.Fatalf("plan %+v, want ops removed", p)
	}
	close(g.release)
	g.completed(t)
	res := g.toolResult(t, "who")
	if msg, _ := res["error"].(string); !strings.Contains(msg, "removed by a config reload") {
		t.Fatalf("a call through a removed server's tool answered %v", res)
	}
	if n := a.whoCalls.Load(); n != 1 {
		t.Fatalf("A got %d who calls, want 1 (none after its removal)", n)
	}
	waitCond(t, "the removed server's connection to close", func() bool { return a.sessions() == 0 })
	if st := s.Status(); len(st) != 0 {
		t.Fatalf("status after the removal %+v", st)
	}
	g.wake() // the tool set no longer offers who: the model is told it does not exist
	g.completed(t)
	if res := g.toolResult(t, "who"); !strings.Contains(res["error"].(string), "not found") {
		t.Fatalf("who after the removal answered %v", res)
	}
}

// A plan whose added server's header cannot be read fails whole and
// changes nothing: the servers in force stay connected.
func TestAPlanThatCannotReadAHeaderChangesNothing(t *testing.T) {
	t.Parallel()
	a := serveNamed(t, "A")
	s := start(t, map[string]config.MCPServer{"ops": at(a.url)})
	waitUp(t, s, "ops", nil)
	_, err := s.Plan(map[string]config.MCPServer{
		"web": {URL: a.url, Timeout: config.Duration(10 * time.Second), HeadersEnv: map[string]string{"Authorization": "MCPTOOLS_TEST_UNSET_VARIABLE"}},
	})
	if err == nil || !strings.Contains(err.Error(), "mcp_servers.web: headers_env.Authorization") {
		t.Fatalf("plan error %v", err)
	}
	if st := s.Status(); len(st) != 1 || st[0].Server != "ops" || !st[0].Up {
		t.Fatalf("status %+v", st)
	}
	if errors.Is(err, mcptools.ErrUnavailable) {
		t.Fatal("a plan error is not an unavailable server")
	}
}
