package mcptools_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/internal/mcptest"
)

// A tool call to an MCP server over HTTP carries the traced turn's
// context as its traceparent header, so the server's trace joins the
// turn's.
func TestHTTPCallCarriesTheTurnsTrace(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	srv := mcp.NewServer(&mcp.Implementation{Name: "web", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "look", Description: "Look."}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		mu.Lock()
		seen = append(seen, req.Extra.Header.Get("traceparent"))
		mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "seen"}}}, nil, nil
	})
	s := start(t, map[string]config.MCPServer{"web": {URL: mcptest.Serve(t, srv), Timeout: config.Duration(5 * time.Second)}})
	waitUp(t, s, "web", nil)
	tp := sdktrace.NewTracerProvider()
	r := newAgent(t, s, []config.AgentMCP{{Server: "web", Tools: []string{"look"}}}, []config.ScriptStep{step("look", nil), {Text: "done"}},
		func(d *driver.Deps) { d.Tracer = tp.Tracer("test") })
	r.a.Send(inbox.Message{Kind: inbox.Wake, Text: "go", Source: "test"})
	var traceID string
	timeout := time.After(deadline)
	for traceID == "" {
		select {
		case e := <-r.sub.C:
			if e.Type == events.TurnCompleted {
				traceID, _ = e.Data["trace_id"].(string)
				if traceID == "" {
					t.Fatalf("traced turn without a trace id: %v", e.Data)
				}
			}
		case <-timeout:
			t.Fatal("no turn completed")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || !strings.HasPrefix(seen[0], "00-"+traceID+"-") {
		t.Fatalf("the MCP server saw traceparent %q, want the turn's trace %s", seen, traceID)
	}
}
