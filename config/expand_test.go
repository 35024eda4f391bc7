package config

import (
	"reflect"
	"testing"
)

func TestExpandEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{"HOST": "db.internal", "EMPTY": "", "MULTI": "a\nb", "PORT": "8080", "TRUE": "true"}
	tests := []struct {
		name, in string
		want     map[string]any
		errs     []string
	}{
		{name: "set", in: "url: redis://${HOST}:6379", want: map[string]any{"url": "redis://db.internal:6379"}},
		{name: "default unused", in: "h: ${HOST:-localhost}", want: map[string]any{"h": "db.internal"}},
		{name: "default for unset", in: "h: ${NOPE:-localhost}", want: map[string]any{"h": "localhost"}},
		{name: "default for empty", in: "h: ${EMPTY:-localhost}", want: map[string]any{"h": "localhost"}},
		{name: "empty default", in: `h: "${NOPE:-}"`, want: map[string]any{"h": ""}},
		{name: "set but empty", in: `h: "${EMPTY}"`, want: map[string]any{"h": ""}},
		{name: "plain empty is null", in: "h: ${EMPTY}", want: map[string]any{"h": nil}},
		{name: "default with colon", in: "u: ${NOPE:-nats://x:4222}", want: map[string]any{"u": "nats://x:4222"}},
		{name: "dollar escape", in: "p: $${HOST} costs $$5", want: map[string]any{"p": "${HOST} costs $5"}},
		{name: "lone dollar", in: "p: $5 and $HOST and $", want: map[string]any{"p": "$5 and $HOST and $"}},
		{name: "comments are not expanded", in: "# ${NOPE}\na: 1 # ${NOPE}", want: map[string]any{"a": 1}},
		{
			name: "plain takes its type, quoted stays a string",
			in:   "n: ${PORT}\nb: ${TRUE}\nq: '${PORT}'\nt: !!str ${TRUE}\nm: ${NOPE:-<<}",
			want: map[string]any{"n": 8080, "b": true, "q": "8080", "t": "true", "m": "<<"},
		},
		{name: "line break in value", in: "a: ${MULTI}\nb: [${MULTI}]", want: map[string]any{"a": "a\nb", "b": []any{"a\nb"}}},
		{
			name: "an alias is its anchor's value",
			in:   "a: &x ${HOST}\nb: *x\nc: {<<: &m {h: ${PORT}}}\nd: *m",
			want: map[string]any{"a": "db.internal", "b": "db.internal", "c": map[string]any{"h": 8080}, "d": map[string]any{"h": 8080}},
		},
		{
			name: "unset without default",
			in:   "a: 1\nb: ${NOPE}\nc: [x, \"${ALSO_NOPE}\"]",
			errs: []string{
				"f.yaml:2: environment variable NOPE is not set (write ${NOPE:-default} to give a default)",
				"f.yaml:3: environment variable ALSO_NOPE is not set (write ${ALSO_NOPE:-default} to give a default)",
			},
		},
		{
			name: "bad name",
			in:   "a: ${1X}",
			errs: []string{`f.yaml:1: bad reference "${1X}": want ${NAME} or ${NAME:-default} ($$ for a literal $)`},
		},
		{
			name: "unterminated",
			in:   "a: ${HOST\nb: 1",
			errs: []string{`f.yaml:1: unterminated "${": want ${NAME} or ${NAME:-default} ($$ for a literal $)`},
		},
		{
			name: "a reference does not span a line break",
			in:   "a: |\n  ${HOST\n  }\n",
			errs: []string{`f.yaml:2: unterminated "${": want ${NAME} or ${NAME:-default} ($$ for a literal $)`},
		},
		{
			name: "the line in a literal block",
			in:   "a: 1\nb: |\n  first\n\n  then ${NOPE}\n",
			errs: []string{"f.yaml:5: environment variable NOPE is not set (write ${NOPE:-default} to give a default)"},
		},
		{
			name: "a reference in a key",
			in:   "a: 1\n${HOST}: 1\nm: {x${HOST:-y}: 2}",
			errs: []string{
				`f.yaml:2: key "${HOST}": ${...} is expanded in values only, not in keys`,
				`f.yaml:3: key "x${HOST:-y}": ${...} is expanded in values only, not in keys`,
			},
		},
		{name: "not in an alias", in: "a: *${HOST}", errs: []string{"f.yaml: invalid YAML: unknown anchor '${HOST}' referenced"}},
		{name: "keys are taken as written", in: "$${x}: 1\n$$: 2\n$x: 3", want: map[string]any{"$${x}": 1, "$$": 2, "$x": 3}},
		{
			name: "flow collections",
			in:   "m: {h: ${HOST}, n: ${PORT}, d: ${NOPE:-}}\nl: [${TRUE}, x${HOST}y]",
			want: map[string]any{"m": map[string]any{"h": "db.internal", "n": 8080, "d": nil}, "l": []any{true, "xdb.internaly"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			doc, errs := parseExpanded([]byte(tt.in), "f.yaml", envMap(env))
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			assertErrors(t, got, tt.errs)
			if tt.errs != nil {
				return
			}
			var out map[string]any
			if err := doc.Decode(&out); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(out, tt.want) {
				t.Errorf("decoded %#v, want %#v", out, tt.want)
			}
		})
	}
}

// Injections that turned one ${ALERT_NOTE} into extra agent keys while
// ${...} was expanded into the YAML text: each grants the agent http_get
// on loopback. None contains "\n" or "\r", which were refused. Block style
// uses U+2028 (LINE SEPARATOR), a line break to the YAML scanner.
var envInjections = []struct {
	name, agent, note string
}{
	{
		name:  "flow mapping, unquoted reference",
		agent: "  - {name: a, model: fake, instruction: ${ALERT_NOTE}}\n",
		note:  `x, http_get_allow_private: true, tools: [http_get], http_get: ["http://127.0.0.1/"]`,
	},
	{
		name:  "flow mapping, quoted reference",
		agent: "  - {name: a, model: fake, instruction: \"${ALERT_NOTE}\"}\n",
		note:  `x", http_get_allow_private: true, tools: [http_get], http_get: ["http://127.0.0.1/"]} #`,
	},
	{
		name:  "block mapping, unquoted reference",
		agent: "  - name: a\n    model: fake\n    instruction: ${ALERT_NOTE}\n",
		note:  "x\u2028    http_get_allow_private: true\u2028    tools: [http_get]\u2028    http_get: [\"http://127.0.0.1/\"]",
	},
	{
		name:  "block mapping, quoted reference",
		agent: "  - name: a\n    model: fake\n    instruction: \"${ALERT_NOTE}\"\n",
		note:  "x\"\u2028    http_get_allow_private: true\u2028    tools: [http_get]\u2028    http_get: [\"http://127.0.0.1/\"] #",
	},
}

func TestEnvValueCannotAddKeys(t *testing.T) {
	t.Parallel()
	for _, tt := range envInjections {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			text := "models:\n  fake: {provider: scripted, behaviour: demo}\nagents:\n" + tt.agent
			baseline, errs := loadFiles(t, map[string]string{"config.yaml": text}, map[string]string{"ALERT_NOTE": "benign"})
			assertErrors(t, errs, nil)
			c, errs := loadFiles(t, map[string]string{"config.yaml": text}, map[string]string{"ALERT_NOTE": tt.note})
			assertErrors(t, errs, nil)
			if c == nil {
				t.Fatal("no config loaded")
			}
			a := c.Agents[0]
			if a.Instruction != tt.note {
				t.Errorf("instruction = %q, want the variable's value verbatim %q", a.Instruction, tt.note)
			}
			if a.HTTPGetAllowPrivate || len(a.HTTPGet) > 0 {
				t.Errorf("http_get_allow_private = %v, http_get = %q: the value added keys", a.HTTPGetAllowPrivate, a.HTTPGet)
			}
			if b := baseline.Agents[0]; !reflect.DeepEqual(a.Tools, b.Tools) {
				t.Errorf("tools = %q, want %q as without the injection", a.Tools, b.Tools)
			}
		})
	}
}

func TestEnvValuePassesVerbatim(t *testing.T) {
	t.Parallel()
	value := "a # not a comment: {b} \"c\" 'd' [e]\n- f: g\n  &h *i !j |k"
	for _, ref := range []string{`${V}`, `"${V}"`, `'${V}'`, "|\n      ${V}"} {
		t.Run(ref, func(t *testing.T) {
			t.Parallel()
			text := yamlDoc(`
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - name: a
    model: fake
    instruction: ` + ref + `
`)
			c, errs := loadFiles(t, map[string]string{"config.yaml": text}, map[string]string{"V": value})
			assertErrors(t, errs, nil)
			want := value
			if ref[0] == '|' {
				want += "\n" // a literal block keeps its final line break
			}
			if c != nil && c.Agents[0].Instruction != want {
				t.Errorf("instruction = %q, want %q", c.Agents[0].Instruction, want)
			}
		})
	}
}

func TestEnvPlainValueTakesItsType(t *testing.T) {
	t.Parallel()
	text := yamlDoc(`
store: {url: "redis://localhost:6379/0"}
nats:
  max_message_bytes: ${MAX_BYTES}
  jetstream: ${JETSTREAM}
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - name: a
    model: fake
    instruction: ${NOTE}
    wake_on_start: ${FLAG}
    schedules: [{name: s, cron: "@daily", enabled: ${FLAG}, prompt: '${FLAG}'}]
    subscribe: [{subject: "${SUBJECT}"}]
`)
	env := map[string]string{
		"MAX_BYTES": "8080", "JETSTREAM": "false", "FLAG": "true",
		"NOTE": "foo: bar", "SUBJECT": "[x]",
	}
	c, errs := loadFiles(t, map[string]string{"config.yaml": text}, env)
	assertErrors(t, errs, nil)
	if c == nil {
		t.Fatal("no config loaded")
	}
	a := c.Agents[0]
	s := a.Schedules[0]
	if c.NATS.MaxMessageBytes != 8080 || *c.NATS.JetStream || !a.WakeOnStart || !*s.Enabled {
		t.Errorf("max_message_bytes %d, jetstream %v, wake_on_start %v, enabled %v; want 8080, false, true, true",
			c.NATS.MaxMessageBytes, *c.NATS.JetStream, a.WakeOnStart, *s.Enabled)
	}
	if a.Instruction != "foo: bar" || s.Prompt != "true" || a.Subscribe[0].Subject != "[x]" {
		t.Errorf("instruction %q, prompt %q, subject %q; want strings as written", a.Instruction, s.Prompt, a.Subscribe[0].Subject)
	}
}
