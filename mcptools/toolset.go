package mcptools

import (
	"encoding/json"
	"slices"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/adk/agent"
	"google.golang.org/adk/tool"
	"google.golang.org/adk/tool/functiontool"

	"github.com/agent-worker/agent-worker/config"
)

// Toolset returns agent's MCP tools: for each grant, the tools its server
// lists that the grant allows, under the names the model sees
// (tool_prefix + name). A name already taken — one of taken (the agent's
// built-in tools) or an earlier grant's — is refused and logged once.
// A turn's first model call waits while a server of the grants is still
// making its first connection, at most the server's timeout (see
// awaitFirstAttempts), so a message that arrives at start finds the
// server's tools. A server whose first attempt failed, or outlasted that
// wait, has never answered: a grant's tools named explicitly are offered
// with an open schema, and their calls say the server is unavailable; a
// "*" grant offers nothing until the server lists its tools. The tools a
// server listed last stay offered while it is down.
//
// A grant follows its server by name: when a reload adds, changes or
// removes the server (Plan), the tool set offers the new connection's
// tools, or none, from its next Tools call on; the tool set itself need
// not be rebuilt.
func (s *Servers) Toolset(agentName string, grants []config.AgentMCP, taken []string) tool.Toolset {
	return &toolset{s: s, agent: agentName, grants: grants, taken: taken, built: map[string]built{}, warned: map[string]bool{}}
}

type toolset struct {
	s      *Servers
	agent  string
	grants []config.AgentMCP
	taken  []string

	mu     sync.Mutex
	built  map[string]built // by server: its tools as of a listing
	warned map[string]bool
}

type built struct {
	srv     *server // the connection the tools call
	version int
	tools   []tool.Tool
	names   []string
}

func (t *toolset) Name() string { return "mcp" }

// Tools is asked by ADK once per turn, before its first model call. It
// first waits for the grants' servers that are still making their first
// connection (awaitFirstAttempts, at most each one's timeout), then
// rebuilds a server's tools only when the server listed them anew or a
// reload replaced it.
func (t *toolset) Tools(ctx agent.ReadonlyContext) ([]tool.Tool, error) {
	t.awaitFirstAttempts(ctx)
	t.mu.Lock()
	defer t.mu.Unlock()
	taken := map[string]bool{}
	for _, n := range t.taken {
		taken[n] = true
	}
	var out []tool.Tool
	for _, g := range t.grants {
		srv := t.s.server(g.Server) // by name: a reload's replacement from its next call on
		if srv == nil {
			continue
		}
		srv.mu.Lock()
		listed, version := srv.tools, srv.version
		srv.mu.Unlock()
		b, ok := t.built[g.Server]
		if !ok || b.srv != srv || b.version != version {
			b = t.build(srv, g, listed, version)
			t.built[g.Server] = b
		}
		for i, tl := range b.tools {
			name := b.names[i]
			if taken[name] {
				if key := g.Server + "/" + name; !t.warned[key] {
					t.warned[key] = true
					srv.log.Error("MCP tool refused: the agent already has a tool of that name; set the server's tool_prefix", "agent", t.agent, "tool", name)
				}
				continue
			}
			taken[name] = true
			out = append(out, tl)
		}
	}
	return out, nil
}

// build makes the grant's tools from the server's listing.
func (t *toolset) build(srv *server, g config.AgentMCP, listed []*mcp.Tool, version int) built {
	all := slices.Contains(g.Tools, "*")
	b := built{srv: srv, version: version}
	add := func(remote, description string, schema any) {
		name := config.ModelToolName(srv.cfg.ToolPrefix, remote)
		tl, err := newTool(srv, name, remote, description, schema)
		if err != nil {
			srv.log.Error("MCP tool not offered: its input schema is unusable", "tool", remote, "error", err)
			return
		}
		b.tools, b.names = append(b.tools, tl), append(b.names, name)
	}
	if version == 0 { // never listed
		if !all {
			for _, remote := range g.Tools {
				add(remote, "Tool of the MCP server "+srv.name+" (unavailable so far: its description is not known yet).", nil)
			}
		}
		return b
	}
	for _, mt := range listed {
		if all || slices.Contains(g.Tools, mt.Name) {
			add(mt.Name, mt.Description, mt.InputSchema)
		}
	}
	return b
}

// newTool is the ADK tool that calls remote on srv.
func newTool(srv *server, name, remote, description string, schema any) (tool.Tool, error) {
	in := &jsonschema.Schema{Type: "object"}
	if schema != nil {
		raw, err := json.Marshal(schema)
		if err != nil {
			return nil, err
		}
		in = &jsonschema.Schema{}
		if err := json.Unmarshal(raw, in); err != nil {
			return nil, err
		}
	}
	return functiontool.New(functiontool.Config{Name: name, Description: description, InputSchema: in,
		OutputSchema: &jsonschema.Schema{Type: "object"}},
		func(ctx tool.Context, args map[string]any) (map[string]any, error) {
			return srv.call(ctx, remote, args)
		})
}
