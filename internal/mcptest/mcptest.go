// Package mcptest runs real MCP servers (github.com/modelcontextprotocol/go-sdk)
// for tests: over streamable HTTP on 127.0.0.1, closed when the test ends,
// and an address where nothing listens. It has no use outside tests.
package mcptest

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Serve serves s over streamable HTTP and returns its URL. Register it
// before anything that connects to it: the server closes after the test's
// later cleanups, since a connected client holds a stream open.
func Serve(t testing.TB, s *mcp.Server) string {
	t.Helper()
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(hs.Close)
	return hs.URL
}

// Echo is a server with one tool, echo {text}, answering "echo: <text>";
// calls counts its calls.
func Echo() (s *mcp.Server, calls *atomic.Int64) {
	s, calls = mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil), &atomic.Int64{}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text."}, func(_ context.Context, _ *mcp.CallToolRequest, a struct {
		Text string `json:"text" jsonschema:"what to echo"`
	}) (*mcp.CallToolResult, any, error) {
		calls.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + a.Text}}}, nil, nil
	})
	return s, calls
}

// DeadURL is an MCP URL on 127.0.0.1 where nothing listens.
func DeadURL(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "http://" + l.Addr().String() + "/mcp"
}
