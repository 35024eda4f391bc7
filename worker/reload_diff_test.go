package worker

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agent-worker/agent-worker/config"
)

// loadYAML loads a config file holding y.
func loadYAML(t *testing.T, y string) *config.Config {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	return cfg
}

const diffBase = `data_dir: /tmp/aw
nats: {listen: "127.0.0.1:4222"}
api: {listen: "127.0.0.1:8080"}
models:
  fake: {provider: scripted, behaviour: demo}
  other: {provider: scripted, behaviour: demo}
agents:
  - name: a
    model: fake
    instruction: "one"
    schedules: [{name: s, cron: "@every 1h", prompt: p}]
  - name: b
    model: fake
  - name: c
    model: other
`

// subscribed is diffBase with agent b bound to two subjects.
var subscribed = strings.Replace(diffBase, "  - name: b\n    model: fake\n", "  - name: b\n    model: fake\n    subscribe: [{subject: \"alerts.>\"}, {subject: \"ops.x\", mode: deferred}]\n", 1)

// mcpBase is diffBase with two MCP servers, fs granted to b.
var mcpBase = strings.Replace(diffBase, "  - name: b\n    model: fake\n", "  - name: b\n    model: fake\n    mcp: [{server: fs, tools: [read]}]\n", 1) +
	"mcp_servers: {fs: {url: \"http://a.example/mcp\"}, gh: {url: \"http://gh.example/mcp\"}}\n"

func TestDiffConfig(t *testing.T) {
	t.Parallel()
	base := loadYAML(t, diffBase)
	cases := []struct {
		name                    string
		from, to                string
		added, removed, changed []string
		why                     map[string][]string
		restart                 []string // regexps, one per RestartOnly entry
		tokens                  bool
		mcp, hooks              Keys
	}{
		{name: "unchanged", to: diffBase},
		{name: "instruction and schedule", to: strings.Replace(strings.Replace(diffBase, `"one"`, `"two"`, 1), "@every 1h", "@every 2h", 1),
			changed: []string{"a"}, why: map[string][]string{"a": {"instruction", "schedules"}}},
		{name: "added and removed", to: strings.Replace(diffBase, "  - name: b\n    model: fake\n", "  - name: d\n    model: fake\n", 1),
			added: []string{"d"}, removed: []string{"b"}},
		{name: "a model's definition changes its agents only", to: strings.Replace(diffBase, "other: {provider: scripted, behaviour: demo}", "other: {provider: scripted, behaviour: demo, model: o-2}", 1),
			changed: []string{"c"}, why: map[string][]string{"c": {"models.other"}}},
		{name: "listen addresses and data_dir need a restart", to: strings.NewReplacer(`127.0.0.1:4222`, `127.0.0.1:4333`, `127.0.0.1:8080`, `127.0.0.1:9090`, "/tmp/aw", "/tmp/other").Replace(diffBase),
			restart: []string{`config\.yaml:1: data_dir: cannot change`, `config\.yaml:2: nats\.listen: cannot change`, `config\.yaml:3: api\.listen: cannot change`}},
		{name: "store and stream need a restart", to: diffBase + "store: {url: \"memory://\"}\n",
			restart: []string{`store\.url`}},
		{name: "a subject bound by a reload", to: strings.Replace(diffBase, "  - name: b\n    model: fake\n", "  - name: b\n    model: fake\n    subscribe: [{subject: \"alerts.>\"}]\n", 1),
			changed: []string{"b"}, why: map[string][]string{"b": {"subscribe"}}},
		{name: "a subject dropped, one added, a mode changed", from: subscribed,
			to:      strings.Replace(subscribed, `[{subject: "alerts.>"}, {subject: "ops.x", mode: deferred}]`, `[{subject: "alerts.>", mode: deferred}, {subject: "ops.y"}]`, 1),
			changed: []string{"b"}, why: map[string][]string{"b": {"subscribe"}}},
		{name: "an agent with subscribe: added", to: diffBase + "  - {name: e, model: fake, subscribe: [{subject: \"x.>\"}]}\n",
			added: []string{"e"}},
		{name: "an agent with subscribe: removed", from: subscribed, to: strings.Replace(subscribed, "  - name: b\n    model: fake\n    subscribe: [{subject: \"alerts.>\"}, {subject: \"ops.x\", mode: deferred}]\n", "", 1),
			removed: []string{"b"}},
		{name: "an agent with subagents added", to: diffBase + "  - {name: e, model: fake, tools: [spawn_subagent], subscribe: [{subject: \"x.>\"}]}\n",
			added: []string{"e"}},
		{name: "an agent with replica_affinity added still needs a restart", to: diffBase + "  - {name: e, model: fake, replica_affinity: r1}\n",
			added: []string{"e"}, restart: []string{`adding agent e: it has a replica_affinity`}},
		{name: "pricing changes every agent", to: diffBase + "pricing: {fake-1: {input_per_mtok: 1}}\n",
			changed: []string{"a", "b", "c"}, why: map[string][]string{"a": {"pricing"}, "c": {"pricing"}}},
		{name: "an added mcp server changes no agent", to: diffBase + "mcp_servers: {fs: {command: [/bin/true]}}\n",
			mcp: Keys{Added: []string{"fs"}}},
		{name: "an mcp server added and granted changes its agent", to: strings.Replace(diffBase, "  - name: b\n    model: fake\n", "  - name: b\n    model: fake\n    mcp: [{server: fs, tools: [read]}]\n", 1) + "mcp_servers: {fs: {command: [/bin/true]}}\n",
			changed: []string{"b"}, why: map[string][]string{"b": {"mcp"}}, mcp: Keys{Added: []string{"fs"}}},
		{name: "an mcp server changed under an unchanged agent", from: mcpBase, to: strings.Replace(mcpBase, "http://a.example/mcp", "http://b.example/mcp", 1),
			mcp: Keys{Changed: []string{"fs"}}},
		{name: "an mcp server removed with its grant", from: mcpBase, to: strings.NewReplacer("mcp_servers: {fs: {url: \"http://a.example/mcp\"}, gh: {url: \"http://gh.example/mcp\"}}\n", "mcp_servers: {gh: {url: \"http://gh.example/mcp\"}}\n", "    mcp: [{server: fs, tools: [read]}]\n", "").Replace(mcpBase),
			changed: []string{"b"}, why: map[string][]string{"b": {"mcp"}}, mcp: Keys{Removed: []string{"fs"}}},
		{name: "webhooks added, changed and removed", from: diffBase + "webhooks: {ci: {agent: a, text: \"{{.x}}\"}, old: {agent: b, text: \"{{.x}}\"}}\n",
			to:    diffBase + "webhooks: {ci: {agent: a, text: \"CI {{.x}}\"}, new: {agent: c, format: grafana}}\n",
			hooks: Keys{Added: []string{"new"}, Removed: []string{"old"}, Changed: []string{"ci"}}},
		{name: "wake_on_resolved changes its agent", to: strings.Replace(diffBase, "  - name: b\n    model: fake\n", "  - name: b\n    model: fake\n    wake_on_resolved: true\n", 1),
			changed: []string{"b"}, why: map[string][]string{"b": {"wake_on_resolved"}}},
		{name: "an added agent with wake_on_resolved", to: diffBase + "  - {name: e, model: fake, wake_on_resolved: true}\n",
			added: []string{"e"}},
		{name: "tokens", to: strings.Replace(diffBase, `api: {listen: "127.0.0.1:8080"}`, `api: {listen: "127.0.0.1:8080", tokens: [{name: ops, role: operate, value_env: X}]}`, 1),
			tokens: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			from := base
			if c.from != "" {
				from = loadYAML(t, c.from)
			}
			next := loadYAML(t, c.to)
			ch := diffConfig(from, next)
			if !slices.Equal(ch.Added, c.added) || !slices.Equal(ch.Removed, c.removed) || !slices.Equal(ch.Changed, c.changed) {
				t.Errorf("added %v removed %v changed %v; want %v %v %v", ch.Added, ch.Removed, ch.Changed, c.added, c.removed, c.changed)
			}
			for a, why := range c.why {
				if !slices.Equal(ch.Why[a], why) {
					t.Errorf("why %s: %v, want %v", a, ch.Why[a], why)
				}
			}
			if len(ch.RestartOnly) != len(c.restart) {
				t.Fatalf("restart-only %q, want %d matching %q", ch.RestartOnly, len(c.restart), c.restart)
			}
			for i, re := range c.restart {
				if !regexp.MustCompile(re).MatchString(ch.RestartOnly[i]) {
					t.Errorf("restart-only[%d] %q does not match %s", i, ch.RestartOnly[i], re)
				}
			}
			if ch.Tokens != c.tokens {
				t.Errorf("tokens changed %v, want %v", ch.Tokens, c.tokens)
			}
			if !reflect.DeepEqual(ch.MCPServers, c.mcp) || !reflect.DeepEqual(ch.Webhooks, c.hooks) {
				t.Errorf("mcp_servers %+v webhooks %+v; want %+v %+v", ch.MCPServers, ch.Webhooks, c.mcp, c.hooks)
			}
			if ch.Unchanged() != (c.to == diffBase || c.to == c.from) {
				t.Errorf("unchanged %v (hashes %s %s)", ch.Unchanged(), ch.From, ch.To)
			}
		})
	}
}

// TestConfigHashIgnoresThePath: the same content read from two files has
// one hash; any change of content another.
func TestConfigHashIgnoresThePath(t *testing.T) {
	t.Parallel()
	a, b := loadYAML(t, diffBase), loadYAML(t, diffBase)
	if a.File == b.File || ConfigHash(a) != ConfigHash(b) {
		t.Fatalf("hashes %s %s for one content", ConfigHash(a), ConfigHash(b))
	}
	if c := loadYAML(t, strings.Replace(diffBase, `"one"`, `"uno"`, 1)); ConfigHash(c) == ConfigHash(a) {
		t.Fatal("a changed instruction kept the hash")
	}
}
