package config

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// MCPServer is an MCP server the worker connects to (mcp_servers.<name>):
// a command it starts and speaks to over stdio, or a streamable HTTP
// endpoint. Its tools are offered to the agents whose mcp: list names it.
type MCPServer struct {
	// Command is the program and its arguments (stdio transport). The
	// worker starts it, restarts it with backoff when it dies, and stops
	// it on shutdown; its stderr goes to the worker's log.
	Command []string `yaml:"command"`
	// Env is set in the command's environment. It wins over a variable
	// of the same name the command would otherwise get.
	Env map[string]string `yaml:"env"`
	// InheritEnv names variables of the worker's environment the command
	// gets too, read at start (a name that is not set there is a start
	// error). Beyond these and Env the command gets only the worker's
	// PATH, HOME, TMPDIR, TZ and locale (LANG, LC_*), each when set: never
	// its model keys, API tokens or cloud credentials.
	InheritEnv []string `yaml:"inherit_env"`
	// URL is a streamable HTTP endpoint (http:// or https://).
	URL string `yaml:"url"`
	// HeadersEnv maps an HTTP header to the environment variable holding
	// its value (a bearer token); HeadersFile to a file holding it.
	HeadersEnv  map[string]string `yaml:"headers_env"`
	HeadersFile map[string]string `yaml:"headers_file"`
	// Timeout bounds one tool call (and the connection's set-up). Default
	// 30s.
	Timeout Duration `yaml:"timeout"`
	// ToolPrefix is put before each of the server's tool names as the
	// model sees them, to tell apart tools of the same name on two
	// servers or a server tool named like a built-in tool.
	ToolPrefix string `yaml:"tool_prefix"`
	// MaxResultBytes bounds a tool result given to the model; a longer one
	// is clipped and marked. Default 65536.
	MaxResultBytes int `yaml:"max_result_bytes"`
}

// AgentMCP grants an agent tools of one MCP server (agents[].mcp[]).
type AgentMCP struct {
	// Server is a key of mcp_servers.
	Server string `yaml:"server"`
	// Tools are the server's tool names the agent may call (without the
	// server's tool_prefix); "*" is every tool the server lists.
	Tools []string `yaml:"tools"`
}

// MCPDefaultTimeout and MCPDefaultMaxResultBytes are the defaults of
// mcp_servers.<name>.timeout and max_result_bytes.
const (
	MCPDefaultTimeout        = 30 * time.Second
	MCPDefaultMaxResultBytes = 64 << 10
)

var (
	mcpToolName   = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	mcpToolPrefix = regexp.MustCompile(`^[A-Za-z0-9_.-]*$`)
)

// ModelToolName is the name the model sees for tool of an MCP server
// with prefix.
func ModelToolName(prefix, tool string) string { return prefix + tool }

// mcp checks mcp_servers and every agent's mcp: grants, including that no
// two tools an agent is granted by name share the name the model sees
// (with "*" the names are known only when the server answers: the worker
// checks them then).
func (v *validator) mcp(c *Config) {
	for _, name := range sortedKeys(c.MCPServers) {
		v.mcpServer(path{"mcp_servers"}.key(name), name, c.MCPServers[name])
	}
	for i := range c.Agents {
		v.agentMCP(c, path{"agents"}.index(i), &c.Agents[i])
	}
}

// mcpServer checks mcp_servers.<name> (at p): one transport, the keys
// that belong to it, and its bounds.
func (v *validator) mcpServer(p path, name string, s MCPServer) {
	if !namePattern.MatchString(name) {
		v.at(p, "server name %q must match %s (it labels metrics)", name, namePattern)
	}
	switch {
	case len(s.Command) > 0 && s.URL != "":
		v.at(p, "set one of command (stdio) and url (streamable HTTP), not both")
	case len(s.Command) == 0 && s.URL == "":
		v.at(p, "needs command (a program to start, spoken to over stdio) or url (a streamable HTTP endpoint)")
	case len(s.Command) > 0 && strings.TrimSpace(s.Command[0]) == "":
		v.at(p.key("command"), "the program (command[0]) is empty")
	case s.URL != "":
		if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.at(p.key("url"), "want an http:// or https:// URL; got %q", s.URL)
		}
	}
	if s.URL == "" && (len(s.HeadersEnv) > 0 || len(s.HeadersFile) > 0) {
		v.at(p, "headers_env and headers_file are for a url server")
	}
	if len(s.Command) == 0 && len(s.Env) > 0 {
		v.at(p.key("env"), "env is for a command server")
	}
	v.inheritEnv(p, s)
	for _, h := range sortedKeys(s.HeadersEnv) {
		if _, dup := s.HeadersFile[h]; dup {
			v.at(p.key("headers_file").key(h), "header %q is also in headers_env; set it once", h)
		}
	}
	v.duration(p.key("timeout"), s.Timeout)
	if s.MaxResultBytes < 0 {
		v.at(p.key("max_result_bytes"), "must not be negative; got %d", s.MaxResultBytes)
	}
	if !mcpToolPrefix.MatchString(s.ToolPrefix) {
		v.at(p.key("tool_prefix"), "%q must match %s (tool names are [A-Za-z0-9_.-])", s.ToolPrefix, mcpToolPrefix)
	}
}

// agentMCP checks one agent's (at ap) mcp: grants and its approval: list
// against the tools it is granted.
func (v *validator) agentMCP(c *Config, ap path, a *Agent) {
	owner := map[string]string{} // model-facing name → who grants it
	for _, t := range a.Tools {
		owner[t] = "the built-in tool"
	}
	for j, g := range a.MCP {
		v.mcpGrant(c, ap.key("mcp").index(j), a.MCP[:j], g, owner)
	}
	wildcard := slices.ContainsFunc(a.MCP, func(g AgentMCP) bool { return slices.Contains(g.Tools, "*") })
	for k, t := range a.Approval {
		tp := ap.key("approval").index(k)
		switch _, granted := owner[t]; {
		case slices.Index(a.Approval, t) < k:
			v.at(tp, "tool %q is listed twice", t)
		case !granted && !wildcard:
			v.at(tp, "%q is not a tool of this agent (its tools: %s); name a built-in tool it is granted or an MCP tool as the model sees it (with the server's tool_prefix)", t, strings.Join(sortedKeys(owner), ", "))
		}
	}
	v.duration(ap.key("approval_ttl"), a.ApprovalTTL)
}

// mcpGrant checks one mcp: grant (at gp) of an agent, given the grants
// before it, and records each tool it grants by name in owner
// (model-facing name → who grants it).
func (v *validator) mcpGrant(c *Config, gp path, before []AgentMCP, g AgentMCP, owner map[string]string) {
	s, ok := c.MCPServers[g.Server]
	switch {
	case g.Server == "":
		v.at(gp.key("server"), "required: a key of mcp_servers")
		return
	case !ok:
		v.at(gp.key("server"), "unknown MCP server %q (mcp_servers: %s)", g.Server, strings.Join(sortedKeys(c.MCPServers), ", "))
		return
	case slices.IndexFunc(before, func(o AgentMCP) bool { return o.Server == g.Server }) >= 0:
		v.at(gp.key("server"), "MCP server %q is granted twice; list its tools once", g.Server)
		return
	}
	if len(g.Tools) == 0 {
		v.at(gp.key("tools"), `list the server's tools the agent may call, or "*" for all`)
	}
	for k, t := range g.Tools {
		tp := gp.key("tools").index(k)
		if t == "*" {
			if len(g.Tools) > 1 {
				v.at(tp, `"*" grants every tool of the server: list nothing else`)
			}
			continue
		}
		if !mcpToolName.MatchString(t) {
			v.at(tp, "%q is not a tool name (%s)", t, mcpToolName)
			continue
		}
		name := ModelToolName(s.ToolPrefix, t)
		if by, clash := owner[name]; clash {
			v.at(tp, "tool %q of MCP server %q is named %q for the model, as is %s; set mcp_servers.%s.tool_prefix to tell them apart", t, g.Server, name, by, g.Server)
			continue
		}
		owner[name] = fmt.Sprintf("tool %q of MCP server %q", t, g.Server)
	}
}

// inheritEnv checks mcp_servers.<name>.inherit_env: for a command server,
// each a variable name, listed once and not also set in env. Whether each
// is set is known only where the worker runs: Start checks that.
func (v *validator) inheritEnv(p path, s MCPServer) {
	if len(s.InheritEnv) == 0 {
		return
	}
	if len(s.Command) == 0 {
		v.at(p.key("inherit_env"), "inherit_env is for a command server")
		return
	}
	for i, name := range s.InheritEnv {
		ip := p.key("inherit_env").index(i)
		_, inEnv := s.Env[name]
		switch {
		case !envName.MatchString(name):
			v.at(ip, "%q is not an environment variable name (%s)", name, strings.Trim(envName.String(), "^$"))
		case slices.Index(s.InheritEnv, name) < i:
			v.at(ip, "%q is listed twice", name)
		case inEnv:
			v.at(ip, "%q is also set in env; set it in one place", name)
		}
	}
}
