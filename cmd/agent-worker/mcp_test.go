package main

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agent-worker/agent-worker/internal/mcptest"
)

// `mcp check` lists a live server's tools (with its prefix) and says why
// another cannot be reached, exiting non-zero.
func TestMCPCheck(t *testing.T) {
	t.Parallel()
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "query", Description: "Query."}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	live, dead := mcptest.Serve(t, srv), mcptest.DeadURL(t)
	p := writeFile(t, `models: {canned: {provider: scripted, script: [{text: ok}]}}
mcp_servers:
  prom: {url: "`+live+`", tool_prefix: prom_}
  gone: {url: "`+dead+`", timeout: 2s}
agents: [{name: a, model: canned, mcp: [{server: prom, tools: [query]}]}]
`)
	var out, errb syncBuffer
	if code := execute(context.Background(), []string{"mcp", "check", "--config", p}, &out, &errb); code != exitFailed {
		t.Fatalf("exit %d with a server down; stderr %s", code, errb.String())
	}
	o := out.String()
	for _, want := range []string{"prom", "ok: prom_query", "gone", "error: connect"} {
		if !strings.Contains(o, want) {
			t.Errorf("output lacks %q:\n%s", want, o)
		}
	}
	if !strings.Contains(errb.String(), "1 of 2 MCP server(s) failed") {
		t.Fatalf("stderr: %s", errb.String())
	}
	var one syncBuffer
	if code := execute(context.Background(), []string{"mcp", "check", "prom", "--config", p}, &one, &errb); code != exitOK {
		t.Fatalf("checking the live server alone: exit %d: %s", code, errb.String())
	}
}
