package mcptools_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/adk/model"
	"google.golang.org/adk/tool"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/internal/mcptest"
	"github.com/agent-worker/agent-worker/mcptools"
	"github.com/agent-worker/agent-worker/models/scripted"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// deadline bounds every wait: a failure guard, not a sleep.
const deadline = 30 * time.Second

// stdioEnv makes this test binary an MCP server over stdio (TestMain).
const stdioEnv = "MCPTOOLS_TEST_STDIO_SERVER"

// gateEnv names a file the stdio test server waits for before it answers
// anything: a server that takes as long to connect as the test says.
const gateEnv = "MCPTOOLS_TEST_STDIO_GATE"

func TestMain(m *testing.M) {
	if os.Getenv(stdioEnv) == "1" {
		os.Stderr.WriteString("stdio test server starting\n")
		if gate := os.Getenv(gateEnv); gate != "" {
			awaitGate(gate)
		}
		if err := newServer(&calls{}).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// calls counts the calls each tool of the test server got.
type calls struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *calls) add(tool string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[tool]++
}

func (c *calls) of(tool string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[tool]
}

type textArgs struct {
	Text string `json:"text" jsonschema:"what to echo"`
}

// newServer is a real MCP server (go-sdk) with the tools the tests call.
func newServer(c *calls) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "test-server", Version: "1"}, nil)
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text."}, func(_ context.Context, _ *mcp.CallToolRequest, a textArgs) (*mcp.CallToolResult, any, error) {
		c.add("echo")
		return text("echo: " + a.Text), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "Takes a minute."}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		c.add("slow")
		select {
		case <-ctx.Done():
		case <-time.After(time.Minute):
		}
		return text("finally"), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "secret", Description: "Not granted to anyone."}, func(_ context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		c.add("secret")
		return text("the secret"), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "pid", Description: "The server's process id."}, func(_ context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		c.add("pid")
		return text(strconv.Itoa(os.Getpid())), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "The server's environment, one NAME=value a line."}, func(_ context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		c.add("env")
		return text(strings.Join(os.Environ(), "\n")), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "A large result."}, func(_ context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		c.add("big")
		return text(strings.Repeat("x", 100_000)), nil, nil
	})
	return s
}

// httpServer serves newServer over streamable HTTP on 127.0.0.1.
func httpServer(t *testing.T, c *calls) string {
	t.Helper()
	return mcptest.Serve(t, newServer(c))
}

func start(t *testing.T, servers map[string]config.MCPServer) *mcptools.Servers {
	t.Helper()
	s, err := mcptools.Start(servers, mcptools.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func waitUp(t *testing.T, s *mcptools.Servers, name string, not func(mcptools.Status) bool) mcptools.Status {
	t.Helper()
	end := time.Now().Add(deadline)
	for time.Now().Before(end) {
		for _, st := range s.Status() {
			if st.Server == name && st.Up && (not == nil || !not(st)) {
				return st
			}
		}
		<-time.After(10 * time.Millisecond)
	}
	t.Fatalf("server %s never up: %+v", name, s.Status())
	return mcptools.Status{}
}

// agentRig is one agent on a scripted model with the MCP tools granted.
type agentRig struct {
	mu   sync.Mutex
	reqs []*model.LLMRequest
	sub  *events.Subscription
	a    *driver.Agent
	// armed holds the next model call, once ADK has listed the tools
	// for it, until release is closed; entered tells it is held.
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func newAgent(t *testing.T, s *mcptools.Servers, grants []config.AgentMCP, script []config.ScriptStep, deps ...func(*driver.Deps)) *agentRig {
	t.Helper()
	r := &agentRig{entered: make(chan struct{}, 1), release: make(chan struct{})}
	m, err := scripted.New("fake", config.Model{Provider: "scripted", Script: script, Loop: true},
		scripted.WithHook(func(ctx context.Context, req *model.LLMRequest, _ int) error {
			r.mu.Lock()
			r.reqs = append(r.reqs, req)
			r.mu.Unlock()
			if r.armed.CompareAndSwap(true, false) {
				r.entered <- struct{}{}
				select {
				case <-r.release:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	bus := events.NewBus(1024, nil)
	r.sub = bus.Subscribe(1024, nil)
	dd := driver.Deps{Clock: clock.Real(), Store: memstore.New(nil), Events: bus}
	for _, f := range deps {
		f(&dd)
	}
	d, err := driver.New(dd, []driver.Spec{{Name: "oncall", Model: m, HistoryTurns: 5, Toolsets: []tool.Toolset{s.Toolset("oncall", grants, nil)}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Shutdown(context.Background()) })
	r.a, _ = d.Agent("oncall")
	return r
}

// turn sends a message and waits for the turn to complete.
func (r *agentRig) turn(t *testing.T) {
	t.Helper()
	r.wake()
	r.completed(t)
}

// wake sends the agent a message.
func (r *agentRig) wake() { r.a.Send(inbox.Message{Kind: inbox.Wake, Text: "go", Source: "test"}) }

// completed waits for a turn to complete.
func (r *agentRig) completed(t *testing.T) {
	t.Helper()
	timeout := time.After(deadline)
	for {
		select {
		case e := <-r.sub.C:
			switch e.Type {
			case events.TurnCompleted:
				return
			case events.TurnFailed:
				t.Fatalf("turn failed: %v", e.Data)
			}
		case <-timeout:
			t.Fatal("no turn completed")
		}
	}
}

// toolResult returns the newest function response of tool in the newest
// model request.
func (r *agentRig) toolResult(t *testing.T, tool string) map[string]any {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	req := r.reqs[len(r.reqs)-1]
	var last map[string]any // the newest: earlier turns' results are history
	for _, c := range req.Contents {
		for _, p := range c.Parts {
			if p.FunctionResponse != nil && p.FunctionResponse.Name == tool {
				last = p.FunctionResponse.Response
			}
		}
	}
	if last == nil {
		t.Fatalf("the model's last request carries no result of %s", tool)
	}
	return last
}

// declared returns the tool names the model was offered in its first
// request.
func (r *agentRig) declared() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	if cfg := r.reqs[0].Config; cfg != nil {
		for _, tl := range cfg.Tools {
			for _, f := range tl.FunctionDeclarations {
				out = append(out, f.Name)
			}
		}
	}
	return out
}

func step(name string, args map[string]any) config.ScriptStep {
	return config.ScriptStep{Call: &config.Call{Name: name, Args: args}}
}

// awaitGate polls, in the stdio test server's process, until the file
// gate exists; it gives up after the tests' deadline.
func awaitGate(gate string) {
	end := time.Now().Add(deadline)
	for time.Now().Before(end) {
		if _, err := os.Stat(gate); err == nil {
			return
		}
		<-time.After(5 * time.Millisecond)
	}
}
