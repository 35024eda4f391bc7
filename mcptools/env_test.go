package mcptools_test

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/mcptools"
)

// A command server (this test binary) sees the worker's PATH, its own
// env and the inherit_env names, and nothing else of the worker's
// environment: not a model key, not the operate token's variable.
func TestAStdioServerGetsOnlyItsOwnEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-worker-secret")
	t.Setenv("AGENT_WORKER_TOKEN", "operate-secret")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "cloud-secret")
	t.Setenv("MCPTOOLS_TEST_PASSED", "chosen by the operator")
	t.Setenv("LOG_LEVEL", "debug") // configured env wins over the worker's
	if os.Getenv("PATH") == "" {
		t.Setenv("PATH", "/usr/bin:/bin")
	}
	s := start(t, map[string]config.MCPServer{"local": {Command: []string{os.Args[0], "-test.run=^$"},
		Env:        map[string]string{stdioEnv: "1", "LOG_LEVEL": "warn"},
		InheritEnv: []string{"MCPTOOLS_TEST_PASSED"}, Timeout: config.Duration(10 * time.Second)}})
	waitUp(t, s, "local", nil)
	r := newAgent(t, s, []config.AgentMCP{{Server: "local", Tools: []string{"env"}}},
		[]config.ScriptStep{step("env", nil), {Text: "done"}})
	r.turn(t)
	got := map[string]string{}
	for _, kv := range strings.Split(output(t, r.toolResult(t, "env")), "\n") {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	for _, secret := range []string{"OPENAI_API_KEY", "AGENT_WORKER_TOKEN", "AWS_SECRET_ACCESS_KEY"} {
		if v, leaked := got[secret]; leaked {
			t.Errorf("the worker's %s reached the MCP server (%q)", secret, v)
		}
	}
	for k, want := range map[string]string{"PATH": os.Getenv("PATH"), "LOG_LEVEL": "warn", stdioEnv: "1",
		"MCPTOOLS_TEST_PASSED": "chosen by the operator"} {
		if got[k] != want {
			t.Errorf("%s = %q in the server, want %q", k, got[k], want)
		}
	}
	allowed := []string{"PATH", "HOME", "TMPDIR", "TZ", "LANG", "LC_ALL", "LC_CTYPE", "LC_COLLATE", "LC_MESSAGES",
		"LC_MONETARY", "LC_NUMERIC", "LC_TIME", "LOG_LEVEL", stdioEnv, "MCPTOOLS_TEST_PASSED"}
	for k := range got {
		if !slices.Contains(allowed, k) {
			t.Errorf("the server got %s from the worker: neither minimal, nor in env, nor in inherit_env", k)
		}
	}
}

// A variable inherit_env names that the worker's environment lacks stops
// Start (and mcp check) with its name, as headers_env does.
func TestAnUnsetInheritedVariableIsAStartError(t *testing.T) {
	t.Parallel()
	cfg := config.MCPServer{Command: []string{os.Args[0], "-test.run=^$"}, Env: map[string]string{stdioEnv: "1"},
		InheritEnv: []string{"MCPTOOLS_TEST_NEVER_SET"}, Timeout: config.Duration(10 * time.Second)}
	const want = "mcp_servers.local: inherit_env: environment variable MCPTOOLS_TEST_NEVER_SET is not set in the worker's environment"
	if _, err := mcptools.Start(map[string]config.MCPServer{"local": cfg}, mcptools.Options{}); err == nil || err.Error() != want {
		t.Fatalf("Start: %v\nwant %s", err, want)
	}
	if _, err := mcptools.Check(t.Context(), "local", cfg, nil); err == nil || !strings.Contains(err.Error(), "MCPTOOLS_TEST_NEVER_SET is not set") {
		t.Fatalf("Check: %v", err)
	}
}
