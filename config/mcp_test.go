package config

import (
	"slices"
	"testing"
	"time"
)

// MCP servers and grants are checked with file:line: one transport, a
// known server, and no two granted tools named alike for the model.
func TestMCPServers(t *testing.T) {
	t.Parallel()
	const models = "models: {m: {provider: scripted, script: [{text: ok}]}}\n"
	for _, c := range []struct {
		name, yaml string
		errs       []string
	}{
		{"ok", `
mcp_servers:
  prom: {url: "http://127.0.0.1:8080/mcp", headers_env: {Authorization: PROM}, tool_prefix: prom_}
  everything: {command: [npx, server-everything, stdio], env: {LOG_LEVEL: warn}, inherit_env: [GITHUB_TOKEN, HTTPS_PROXY]}
agents:
  - name: a
    model: m
    tools: [publish]
    mcp: [{server: prom, tools: [query, publish]}, {server: everything, tools: ["*"]}]
`, nil},
		{"clash with a built-in tool", `
mcp_servers:
  ops: {command: [ops-mcp]}
agents:
  - name: a
    model: m
    tools: [publish]
    mcp:
      - server: ops
        tools:
          - publish
`, []string{`config.yaml:12: agents[0].mcp[0].tools[0]: tool "publish" of MCP server "ops" is named "publish" for the model, as is the built-in tool; set mcp_servers.ops.tool_prefix to tell them apart`}},
		{"clash between servers", `
mcp_servers:
  a1: {command: [a]}
  b1: {url: "https://b.example/mcp"}
agents:
  - name: a
    model: m
    mcp:
      - {server: a1, tools: [query]}
      - {server: b1, tools: [query]}
`, []string{`config.yaml:11: agents[0].mcp[1].tools[0]: tool "query" of MCP server "b1" is named "query" for the model, as is tool "query" of MCP server "a1"; set mcp_servers.b1.tool_prefix to tell them apart`}},
		{"approval", `
mcp_servers:
  k8s: {command: [k8s-mcp], tool_prefix: k8s_}
agents:
  - name: a
    model: m
    tools: [publish]
    mcp: [{server: k8s, tools: [restart_deployment]}]
    approval: [k8s_restart_deployment, publish, restart_deployment]
    approval_ttl: -1s
`, []string{
			`config.yaml:10: agents[0].approval[2]: "restart_deployment" is not a tool of this agent (its tools: k8s_restart_deployment, publish); name a built-in tool it is granted or an MCP tool as the model sees it (with the server's tool_prefix)`,
			`config.yaml:11: agents[0].approval_ttl: negative duration "-1s"`,
		}},
		{"transport and grants", `
mcp_servers:
  both: {command: [x], url: "http://h/mcp"}
  none: {timeout: 5s}
  ftp: {url: "ftp://h/mcp"}
agents:
  - name: a
    model: m
    mcp:
      - {server: nope, tools: [x]}
      - {server: ftp, tools: ["*", other]}
`, []string{
			`config.yaml:4: mcp_servers.both: set one of command (stdio) and url (streamable HTTP), not both`,
			`config.yaml:5: mcp_servers.none: needs command (a program to start, spoken to over stdio) or url (a streamable HTTP endpoint)`,
			`config.yaml:6: mcp_servers.ftp.url: want an http:// or https:// URL; got "ftp://h/mcp"`,
			`config.yaml:11: agents[0].mcp[0].server: unknown MCP server "nope" (mcp_servers: both, ftp, none)`,
			`config.yaml:12: agents[0].mcp[1].tools[0]: "*" grants every tool of the server: list nothing else`,
		}},
		{"inherit_env", `
mcp_servers:
  gh:
    command: [github-mcp]
    env: {GITHUB_HOST: github.example}
    inherit_env:
      - GITHUB_TOKEN
      - 1BAD
      - GITHUB_TOKEN
      - GITHUB_HOST
      - "A=B"
  web:
    url: "https://web.example/mcp"
    inherit_env: [GITHUB_TOKEN]
agents: [{name: a, model: m}]
`, []string{
			`config.yaml:9: mcp_servers.gh.inherit_env[1]: "1BAD" is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)`,
			`config.yaml:10: mcp_servers.gh.inherit_env[2]: "GITHUB_TOKEN" is listed twice`,
			`config.yaml:11: mcp_servers.gh.inherit_env[3]: "GITHUB_HOST" is also set in env; set it in one place`,
			`config.yaml:12: mcp_servers.gh.inherit_env[4]: "A=B" is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)`,
			`config.yaml:15: mcp_servers.web.inherit_env: inherit_env is for a command server`,
		}},
	} {
		cfg, errs := loadText(t, models+c.yaml)
		if !slices.Equal(errs, c.errs) {
			t.Errorf("%s: errors\n  %q\nwant\n  %q", c.name, errs, c.errs)
			continue
		}
		if c.errs == nil {
			if s := cfg.MCPServers["prom"]; s.Timeout.D() != 30*time.Second || s.MaxResultBytes != 65536 {
				t.Errorf("defaults: timeout %v, max_result_bytes %d", s.Timeout.D(), s.MaxResultBytes)
			}
			if got := cfg.MCPServers["everything"].InheritEnv; !slices.Equal(got, []string{"GITHUB_TOKEN", "HTTPS_PROXY"}) {
				t.Errorf("inherit_env %q", got)
			}
		}
	}
}
