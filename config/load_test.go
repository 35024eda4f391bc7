package config

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const minimal = `
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - name: a
    model: fake
`

func TestLoadExpandsEnv(t *testing.T) {
	t.Parallel()
	text := yamlDoc(`
data_dir: ${DATA:-/var/lib/agent-worker}
store: {url: "${STORE}"}
nats:
  max_message_bytes: ${MAX_BYTES:-1024}
` + minimal)

	c, errs := loadFiles(t, map[string]string{"config.yaml": text}, map[string]string{"STORE": "redis://cache:6379/0"})
	assertErrors(t, errs, nil)
	if c.DataDir != "/var/lib/agent-worker" || c.Store.URL != "redis://cache:6379/0" || c.NATS.MaxMessageBytes != 1024 {
		t.Errorf("got data_dir %q, store %q, max bytes %d", c.DataDir, c.Store.URL, c.NATS.MaxMessageBytes)
	}

	_, errs = loadFiles(t, map[string]string{"config.yaml": text}, nil)
	assertErrors(t, errs, []string{
		"config.yaml:2: environment variable STORE is not set (write ${STORE:-default} to give a default)",
	})
}

func TestUnknownKeys(t *testing.T) {
	t.Parallel()
	_, got := loadText(t, `
datadir: ./x
nats:
  tls: {ca: /etc/ca.pem}
models:
  fake:
    provider: scripted
    script:
      - txt: hi
      - text: ok
        usage: {inputs: 3}
agents:
  - name: a
    model: fake
    sleep: {mni: 1s}
    schedules:
      - name: s
        cron: "@daily"
        tz: UTC
    colour: blue
`)
	assertErrors(t, got, []string{
		`config.yaml:1: unknown key "datadir"; did you mean "data_dir"?`,
		`config.yaml:3: nats.tls: unknown key "ca" (known keys: ca_file, cert_file, key_file)`,
		`config.yaml:8: models.fake.script[0]: unknown key "txt"; did you mean "text"?`,
		// The step left empty by its unknown key is empty, and says so.
		"config.yaml:8: models.fake.script[0]: empty step: needs one of text, call, error, hang",
		`config.yaml:10: models.fake.script[1].usage: unknown key "inputs"; did you mean "input"?`,
		`config.yaml:14: agents[0].sleep: unknown key "mni"; did you mean "min"?`,
		`config.yaml:18: agents[0].schedules[0]: unknown key "tz" (known keys: name, cron, timezone, prompt, overlap, jitter, enabled)`,
		`config.yaml:19: agents[0]: unknown key "colour" (known keys: name, model, instruction, tools, mcp, approval, approval_ttl, publish, http_get, http_get_allow_private, subscribe, schedules, sleep, budgets, watchdog, limits, subagents, memory, inbox, wake_on_start, wake_on_resolved, turn, replica_affinity)`,
	})
}

func TestDecodeProblems(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{
			name: "wrong types, without follow-on noise",
			yaml: `
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - name: a
    model: [fake]
    inbox: {cap: lots}
    tools: {publish: true}
    sleep: 5m
`,
			want: []string{
				"config.yaml:5: agents[0].model: cannot unmarshal !!seq into string",
				"config.yaml:6: agents[0].inbox.cap: cannot unmarshal !!str `lots` into int",
				"config.yaml:7: agents[0].tools: want a list, got a mapping",
				`config.yaml:8: agents[0].sleep: want a mapping, got "5m"`,
			},
		},
		{
			name: "duplicate keys",
			yaml: `
models:
  fake: {provider: scripted, behaviour: demo}
  fake: {provider: openai}
agents:
  - name: a
    model: fake
    model: other
`,
			want: []string{
				`config.yaml:3: models: duplicate key "fake" (first at line 2)`,
				`config.yaml:7: agents[0]: duplicate key "model" (first at line 6)`,
			},
		},
		{
			name: "syntax error stops loading",
			yaml: `
models:
  fake: {provider: scripted
agents: [
`,
			want: []string{"config.yaml:2: invalid YAML: did not find expected ',' or '}'"},
		},
		{
			name: "not a mapping",
			yaml: `
- name: a
`,
			want: []string{
				"config.yaml:1: want a mapping, got a list",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, got := loadText(t, tt.yaml)
			assertErrors(t, got, tt.want)
		})
	}
}

func TestMergeKeys(t *testing.T) {
	t.Parallel()
	c, errs := loadText(t, `
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - &base
    name: a
    model: fake
    sleep: {min: 1s, max: 1h}
  - <<: *base
    name: b
    sleep: {min: 2s}
`)
	assertErrors(t, errs, nil)
	b, ok := c.Agent("b")
	if !ok {
		t.Fatal("agent b missing")
	}
	if b.Model != "fake" || b.Sleep.Min.D() != 2*time.Second || b.Sleep.Max.D() != 24*time.Hour {
		t.Errorf("merged agent b = model %q, sleep %+v; want explicit keys to win whole", b.Model, b.Sleep)
	}
}

func TestMergeKeyForms(t *testing.T) {
	t.Parallel()
	c, errs := loadText(t, `
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - name: a
    model: fake
    sleep: &short {min: 1s}
    turn: &quick {timeout: 1m}
  - name: b
    model: fake
    turn:
      <<: [*quick, {timeout: 2m, max_per_wake: 3}]
`)
	assertErrors(t, errs, nil)
	if turn := c.Agents[1].Turn; turn.Timeout.D() != time.Minute || turn.MaxPerWake != 3 {
		t.Errorf("turn = %+v; want the first merged mapping to win, others to fill in", turn)
	}

	_, errs = loadText(t, `
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - name: a
    model: fake
    sleep:
      <<: 5s
    turn:
      <<: [{timeout: 1m}, oops]
      bogus: 1
`)
	assertErrors(t, errs, []string{
		`config.yaml:7: agents[0].sleep: << wants a mapping or a list of mappings, got "5s"`,
		`config.yaml:9: agents[0].turn: << wants a mapping or a list of mappings, got "oops"`,
		`config.yaml:10: agents[0].turn: unknown key "bogus" (known keys: timeout, max_per_wake, coalesce, history_turns, retry, max_input_bytes, resume_within)`,
	})
}

func TestScriptFile(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"config.yaml": yamlDoc(`
models:
  fake:
    provider: scripted
    script_file: scripts/fake.yaml
    loop: true
  inline:
    provider: scripted
    script:
      - text: one
      - error: down
agents:
  - {name: a, model: fake}
`),
		"scripts/fake.yaml": yamlDoc(`
# canned responses
- text: looking
  usage: {input: 1200, output: 80}

- call:
    name: schedule_next_turn
    args: {wake_in_seconds: 600}
  text: "costs $5, ${NOT_EXPANDED}"
`),
	}
	c, errs := loadFiles(t, files, nil)
	assertErrors(t, errs, nil)

	fake := c.Models["fake"]
	want := []ScriptStep{
		{Text: "looking", Usage: Usage{Input: 1200, Output: 80}, Line: 2},
		{Call: &Call{Name: "schedule_next_turn", Args: map[string]any{"wake_in_seconds": 600}}, Text: "costs $5, ${NOT_EXPANDED}", Line: 5},
	}
	if !reflect.DeepEqual(fake.Script, want) {
		t.Errorf("script = %+v\nwant %+v", fake.Script, want)
	}
	if fake.Model != "fake" || !fake.Loop {
		t.Errorf("model name %q loop %v; want the key as name and loop kept", fake.Model, fake.Loop)
	}
	inline := c.Models["inline"].Script
	if len(inline) != 2 || inline[0].Line != 9 || inline[1].Line != 10 {
		t.Errorf("inline steps %+v; want lines 9 and 10", inline)
	}
	// Validate on the loaded config attributes steps to the script file.
	if err := c.Validate(); err != nil {
		t.Errorf("Validate after Load: %v", err)
	}
}

func TestScriptFileProblems(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		files  map[string]string
		want   []string
		remark string
	}{
		{
			name: "missing file",
			files: map[string]string{"config.yaml": yamlDoc(`
models:
  fake:
    provider: scripted
    script_file: nowhere.yaml
agents:
  - {name: a, model: fake}
`)},
			want: []string{"config.yaml:4: models.fake.script_file: read nowhere.yaml: no such file or directory"},
		},
		{
			name: "script and script_file",
			files: map[string]string{
				"config.yaml": yamlDoc(`
models:
  fake:
    provider: scripted
    script: [{text: hi}]
    script_file: s.yaml
agents:
  - {name: a, model: fake}
`),
				"s.yaml": "- text: hi\n",
			},
			want: []string{"config.yaml:5: models.fake.script_file: script and script_file are mutually exclusive"},
		},
		{
			name: "problems inside the script file",
			files: map[string]string{
				"config.yaml": yamlDoc(`
models:
  fake:
    provider: scripted
    script_file: s.yaml
agents:
  - {name: a, model: fake}
`),
				"s.yaml": yamlDoc(`
- text: fine
- hang: true
  error: both
- call: {name: publish}
  usage: {input: many}
`),
			},
			want: []string{
				"s.yaml:2: models.fake.script[1]: a step needs exactly one of text, call, error, hang (only text and call go together); got error and hang",
				"s.yaml:5: models.fake.script[2].usage.input: cannot unmarshal !!str `many` into int",
			},
		},
		{
			name: "empty script file",
			files: map[string]string{
				"config.yaml": yamlDoc(`
models:
  fake:
    provider: scripted
    script_file: s.yaml
agents:
  - {name: a, model: fake}
`),
				"s.yaml": "# nothing yet\n",
			},
			want: []string{"config.yaml:4: models.fake.script_file: s.yaml holds no steps"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := writeFiles(t, tt.files)
			_, err := load(filepath.Join(dir, "config.yaml"), envMap(nil))
			// Messages name files as Load saw them; make them relative.
			got := errorLines(t, dir, err)
			for i := range got {
				got[i] = strings.ReplaceAll(got[i], dir+string(filepath.Separator), "")
			}
			assertErrors(t, got, tt.want)
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	t.Parallel()
	_, err := Load(filepath.Join(t.TempDir(), "absent.yaml"))
	if err == nil || !strings.HasSuffix(err.Error(), "absent.yaml: read config: no such file or directory") {
		t.Errorf("Load of a missing file: %v", err)
	}
}

func TestDefaultsApplied(t *testing.T) {
	t.Parallel()
	c, errs := loadText(t, `
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - name: a
    model: fake
    subscribe: [{subject: alerts.>}]
    schedules: [{name: s, cron: "@daily"}]
`)
	assertErrors(t, errs, nil)
	a := c.Agents[0]
	s := a.Schedules[0]
	checks := []struct {
		what      string
		got, want any
	}{
		{"data_dir", c.DataDir, "./data"},
		{"shutdown_grace", c.ShutdownGrace.D(), 30 * time.Second},
		{"log.format", c.Log.Format, "text"},
		{"log.level", c.Log.Level, "info"},
		{"nats.listen", c.NATS.Listen, "127.0.0.1:4222"},
		{"nats.subject_prefix", c.NATS.SubjectPrefix, "agents"},
		{"nats.stream", c.NATS.Stream, "AGENTS"},
		{"nats.max_message_bytes", c.NATS.MaxMessageBytes, 65536},
		{"nats.jetstream", *c.NATS.JetStream, true},
		{"nats.duplicate_window", c.NATS.DuplicateWindow.D(), 2 * time.Minute},
		{"store.url", c.Store.URL, "nats://"},
		{"api.listen", c.API.Listen, "127.0.0.1:8080"},
		{"api.alertmanager_max_bytes", c.API.AlertmanagerMaxBytes, 4 << 20},
		{"api.max_inflight_bytes", c.API.MaxInflightBytes, 16 << 20},
		{"agents[].wake_on_resolved", a.WakeOnResolved, false},
		{"models.fake.model", c.Models["fake"].Model, "fake"},
		{"inbox.cap", a.Inbox.Cap, 256},
		{"turn.timeout", a.Turn.Timeout.D(), 10 * time.Minute},
		{"turn.max_per_wake", a.Turn.MaxPerWake, 10},
		{"turn.history_turns", a.Turn.HistoryTurns, 10},
		{"turn.retry.base", a.Turn.Retry.Base.D(), 2 * time.Second},
		{"turn.retry.max", a.Turn.Retry.Max.D(), 5 * time.Minute},
		{"turn.max_input_bytes", a.Turn.MaxInputBytes, 256 << 10},
		{"limits.turns_per_hour", a.Limits.TurnsPerHour, 360},
		{"limits.turn_burst", a.Limits.TurnBurst, 20},
		{"watchdog.turn_repeat", a.Watchdog.TurnRepeat, 5},
		{"sleep.min", a.Sleep.Min.D(), 10 * time.Second},
		{"sleep.default", a.Sleep.Default.D(), time.Duration(0)},
		{"sleep.max", a.Sleep.Max.D(), 24 * time.Hour},
		{"watchdog.mode", a.Watchdog.Mode, "enforce"},
		{"subscribe.mode", a.Subscribe[0].Mode, "inbox"},
		{"schedule.timezone", s.Timezone, "UTC"},
		{"schedule.overlap", s.Overlap, "skip"},
		{"schedule.enabled", *s.Enabled, true},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.what, ch.got, ch.want)
		}
	}
}

func TestExplicitFalseKept(t *testing.T) {
	t.Parallel()
	c, errs := loadText(t, `
nats: {jetstream: false}
store: {url: "redis://localhost:6379/0"}
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - {name: a, model: fake, schedules: [{name: s, cron: "@daily", enabled: false}]}
`)
	assertErrors(t, errs, nil)
	if *c.NATS.JetStream || *c.Agents[0].Schedules[0].Enabled {
		t.Error("an explicit false was replaced by the default true")
	}
}

func TestExampleConfigLoads(t *testing.T) {
	t.Parallel()
	// An empty environment: every ${...} in the example has a default.
	c, err := load("../config.example.yaml", envMap(nil))
	if err != nil {
		t.Fatalf("config.example.yaml:\n%v", err)
	}
	oncall, ok := c.Agent("oncall")
	if !ok || oncall.Model != "main" || len(oncall.Subscribe) == 0 || oncall.Budgets.SessionUSD == 0 {
		t.Errorf("oncall = %+v", oncall)
	}
	reporter, ok := c.Agent("reporter")
	if !ok || len(reporter.Schedules) != 1 || reporter.Schedules[0].Timezone != "Europe/Berlin" {
		t.Fatalf("reporter = %+v", reporter)
	}
	if main := c.Models["main"]; main.Provider != "openai" || main.APIKeyEnv != "OPENAI_API_KEY" {
		t.Errorf("models.main = %+v; api_key_env must stay a name", main)
	}
	if fake := c.Models["fake"]; len(fake.Script) != 2 || !fake.Loop {
		t.Errorf("models.fake = %+v", fake)
	}
	if _, ok := c.Pricing["gpt-4.1-mini"]; !ok {
		t.Error("pricing for gpt-4.1-mini missing")
	}
	if _, ok := c.Agent("nobody"); ok {
		t.Error(`Agent("nobody") found an agent`)
	}
}

func TestErrorFormat(t *testing.T) {
	t.Parallel()
	errs := Errors{
		{File: "c.yaml", Line: 3, Msg: "agents[0].name: required"},
		{File: "c.yaml", Msg: "read config: permission denied"},
		{Msg: "agents: at least one agent is required"},
	}
	want := "c.yaml:3: agents[0].name: required\nc.yaml: read config: permission denied\nagents: at least one agent is required"
	if got := errs.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	// A line break in a message (a value quoted by a library) stays on the
	// problem's line.
	one := Error{File: "c.yaml", Line: 9, Msg: "bad timezone \"a\nb\": unknown time zone a\nb\r"}
	if got, want := one.Error(), `c.yaml:9: bad timezone "a\nb": unknown time zone a\nb\r`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestPathString(t *testing.T) {
	t.Parallel()
	p := path{}.key("pricing", "gpt-4.1-mini", "input_per_mtok")
	if got := p.String(); got != `pricing["gpt-4.1-mini"].input_per_mtok` {
		t.Errorf("got %s", got)
	}
	q := path{}.key("agents").index(2).key("schedules").index(0)
	if got := q.String(); got != "agents[2].schedules[0]" {
		t.Errorf("got %s", got)
	}
	// Appending to a shared parent must not clobber a sibling.
	parent := path{}.key("a", "b")
	x, y := parent.key("x"), parent.key("y")
	if x.String() != "a.b.x" || y.String() != "a.b.y" {
		t.Errorf("siblings %s, %s", x, y)
	}
}

func TestSyntaxErrorLines(t *testing.T) {
	t.Parallel()
	tests := []struct{ yaml, want string }{
		{"a: 1\nb: 2\nc: {x: 1\nd: [\n", "config.yaml:3: invalid YAML: did not find expected ',' or '}'"},
		{"a: 1\nb: 2\n  c: 3\n", "config.yaml:3: invalid YAML: mapping values are not allowed in this context"},
		{"a: 1\nb: \"unterminated\nc: 3\n", "config.yaml:2: invalid YAML: found unexpected end of stream"},
		{"a: 1\nb:\n\t- x\n", "config.yaml:3: invalid YAML: found character that cannot start any token"},
		{"a:\n  - x\n  y: 1\n", "config.yaml:2: invalid YAML: did not find expected '-' indicator"},
		{"a: 1\n- b\n", "config.yaml:2: invalid YAML: did not find expected key"},
		{"a: *nope\n", "config.yaml: invalid YAML: unknown anchor 'nope' referenced"},
	}
	for _, tt := range tests {
		_, got := loadFiles(t, map[string]string{"config.yaml": tt.yaml}, nil)
		assertErrors(t, got, []string{tt.want})
	}
}

func TestSleepMinDefaultStaysWithinTheOtherBounds(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		sleep Sleep
		want  time.Duration
	}{
		{Sleep{}, 10 * time.Second},
		{Sleep{Default: Duration(5 * time.Second)}, 5 * time.Second},
		{Sleep{Max: Duration(3 * time.Second)}, 3 * time.Second},
		{Sleep{Min: Duration(time.Minute), Max: Duration(time.Hour)}, time.Minute},
	} {
		c := &Config{Agents: []Agent{{Name: "a", Sleep: tt.sleep}}}
		applyDefaults(c)
		if got := c.Agents[0].Sleep.Min.D(); got != tt.want {
			t.Errorf("sleep %+v: min = %v, want %v", tt.sleep, got, tt.want)
		}
	}
}
