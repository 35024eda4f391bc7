package config

import (
	"testing"
	"time"
	_ "time/tzdata" // schedules name IANA zones; don't depend on the host's zoneinfo
)

func TestValidationRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{
			name: "no agents key",
			yaml: `
models:
  fake: {provider: scripted, behaviour: demo}
`,
			want: []string{"config.yaml:1: agents: at least one agent is required"},
		},
		{
			name: "empty agents list",
			yaml: `
models:
  fake: {provider: scripted, behaviour: demo}
agents: []
`,
			want: []string{"config.yaml:3: agents: at least one agent is required"},
		},
		{
			name: "nats store without jetstream",
			yaml: `
nats: {jetstream: false}
store: {url: "nats://"}
models:
  fake: {provider: scripted, behaviour: demo}
agents: [{name: a, model: fake}]
`,
			want: []string{"config.yaml:2: store.url: nats:// keeps state in JetStream KV, but nats.jetstream is false; use redis:// (or memory:// for tests)"},
		},
		{
			name: "history window beyond the store's bound",
			yaml: `
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - name: a
    model: fake
    turn: {history_turns: 65}
`,
			want: []string{"config.yaml:6: agents[0].turn.history_turns: must be at most 64 (the NATS KV store keeps 64 revisions of a list); got 65"},
		},
		{
			name: "bound subject under the agent prefix",
			yaml: `
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - name: a
    model: fake
    subscribe: [{subject: "agents.b.inbox"}]
`,
			want: []string{`config.yaml:6: agents[0].subscribe[0].subject: "agents.b.inbox" is under nats.subject_prefix "agents", whose subjects are routed by agent name; publish to agents.a.inbox or .deferred instead`},
		},
		{
			name: "overlapping subscriptions",
			yaml: `
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - name: a
    model: fake
    subscribe: [{subject: "alerts.>"}, {subject: "alerts.low.*", mode: deferred}]
`,
			want: []string{`config.yaml:6: agents[0].subscribe[1].subject: "alerts.low.*" overlaps subscribe[0] "alerts.>": a message on both would reach the agent twice; make them disjoint`},
		},
		{
			// Two agents may bind overlapping subjects when one contains
			// the other (the stream holds the wider); not when neither does.
			name: "two agents' subjects overlap, neither containing the other",
			yaml: `
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - name: a
    model: fake
    subscribe: [{subject: "alerts.*.db"}, {subject: "tickets.>"}]
  - name: b
    model: fake
    subscribe: [{subject: "alerts.prod.*"}, {subject: "tickets.new"}]
`,
			want: []string{`config.yaml:9: agents[1].subscribe[0].subject: "alerts.prod.*" overlaps "alerts.*.db" of agents[0] (a), but neither contains the other: the input stream cannot hold both; make one contain the other or make them disjoint`},
		},
		{
			name: "agent name not a subject token",
			yaml: `
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - name: Pay.Ments
    model: fake
`,
			want: []string{`config.yaml:4: agents[0].name: "Pay.Ments" must match ^[a-z0-9_-]+$: agent names are NATS subject tokens`},
		},
		{
			name: "agent name missing and duplicated",
			yaml: `
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - name: a
    model: fake
  - model: fake
  - name: a
    model: fake
`,
			want: []string{
				"config.yaml:6: agents[1].name: required",
				`config.yaml:7: agents[2].name: duplicate agent name "a" (also agents[0])`,
			},
		},
		{
			name: "agent model missing and unknown",
			yaml: `
models:
  fake: {provider: scripted, behaviour: demo}
  other: {provider: scripted, behaviour: demo}
agents:
  - name: a
  - name: b
    model: gpt
`,
			want: []string{
				"config.yaml:5: agents[0].model: required: a key of models",
				`config.yaml:7: agents[1].model: unknown model "gpt" (models: fake, other)`,
			},
		},
		{
			name: "provider",
			yaml: `
models:
  fake: {provider: scriptd}
  none: {model: x}
agents:
  - name: a
    model: fake
`,
			want: []string{
				`config.yaml:2: models.fake.provider: must be one of scripted, openai, gemini, anthropic; got "scriptd"`,
				`config.yaml:3: models.none.provider: required: one of scripted, openai, gemini, anthropic`,
			},
		},
		{
			name: "scripted model needs exactly one source",
			yaml: `
models:
  nothing:
    provider: scripted
  both:
    provider: scripted
    behaviour: demo
    script: [{text: hi}]
  chaos: {provider: scripted, behaviour: chaos}
agents:
  - name: a
    model: nothing
`,
			want: []string{
				"config.yaml:2: models.nothing: a scripted model needs one of script, script_file, behaviour",
				"config.yaml:4: models.both: a scripted model needs exactly one of script, script_file, behaviour",
				`config.yaml:8: models.chaos.behaviour: unknown behaviour "chaos" (known: demo)`,
			},
		},
		{
			name: "real providers",
			yaml: `
models:
  main:
    provider: openai
    api_key_env: OPENAI_API_KEY
    api_key_file: /run/key
    loop: true
agents:
  - name: a
    model: main
`,
			want: []string{
				"config.yaml:2: models.main.model: required for provider openai (the provider's model name)",
				"config.yaml:5: models.main.api_key_file: api_key_env and api_key_file are mutually exclusive",
				"config.yaml:6: models.main.loop: only for provider scripted, not openai",
			},
		},
		{
			name: "script steps",
			yaml: `
models:
  fake:
    provider: scripted
    script:
      - text: hi
        call: {name: report_done}
      - usage: {input: 1}
      - error: boom
        hang: true
      - {text: hi, error: boom}
      - call: {args: {x: 1}}
      - text: ok
        usage: {output: -3}
agents:
  - name: a
    model: fake
`,
			want: []string{
				"config.yaml:7: models.fake.script[1]: empty step: needs one of text, call, error, hang",
				"config.yaml:8: models.fake.script[2]: a step needs exactly one of text, call, error, hang (only text and call go together); got error and hang",
				"config.yaml:10: models.fake.script[3]: a step needs exactly one of text, call, error, hang (only text and call go together); got text and error",
				"config.yaml:11: models.fake.script[4].call.name: required",
				"config.yaml:12: models.fake.script[5].usage.output: must not be negative; got -3",
			},
		},
		{
			name: "negative and malformed durations",
			yaml: `
shutdown_grace: -1s
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - name: a
    model: fake
    sleep:
      min: -5s
    turn: {timeout: 5}
`,
			want: []string{
				`config.yaml:1: shutdown_grace: negative duration "-1s"`,
				`config.yaml:8: agents[0].sleep.min: negative duration "-5s"`,
				`config.yaml:9: agents[0].turn.timeout: bad duration "5": want a number and a unit, like 30s, 5m or 1h30m`,
			},
		},
		{
			name: "sleep bounds",
			yaml: `
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - name: a
    model: fake
    sleep: {min: 1h, max: 30m}
  - name: b
    model: fake
    sleep:
      min: 1m
      default: 30s
  - name: c
    model: fake
    sleep: {default: 2h, max: 1h}
  - name: ok
    model: fake
    sleep: {min: 1m, default: 1m, max: 1m}
`,
			want: []string{
				"config.yaml:6: agents[0].sleep.min: min 1h0m0s is above max 30m0s",
				"config.yaml:11: agents[1].sleep.default: default 30s is below min 1m0s",
				"config.yaml:14: agents[2].sleep.default: default 2h0m0s is above max 1h0m0s",
			},
		},
		{
			name: "schedules",
			yaml: `
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - name: a
    model: fake
    schedules:
      - {name: ok, cron: "@every 10m"}
      - name: steps
        cron: "*/61 * * * *"
      - name: hours
        cron: "0 25 * * *"
      - name: Morning
        cron: "@daily"
        timezone: Mars/Base
      - name: ok
        cron: "0 8 * * MON-FRI"
        overlap: pile
      - name: fast
        cron: "@every -1s"
        jitter: -1m
      - name: nocron
`,
			want: []string{
				`config.yaml:9: agents[0].schedules[1].cron: bad cron "*/61 * * * *": minute field "*/61": step 61 exceeds 59`,
				`config.yaml:11: agents[0].schedules[2].cron: bad cron "0 25 * * *": end of range (25) above maximum (23): 25`,
				`config.yaml:12: agents[0].schedules[3].name: "Morning" must match ^[a-z0-9_-]+$: schedule names are API path segments and metric labels`,
				`config.yaml:14: agents[0].schedules[3].timezone: bad timezone "Mars/Base": unknown time zone Mars/Base`,
				`config.yaml:15: agents[0].schedules[4].name: duplicate schedule name "ok" (also schedules[0])`,
				`config.yaml:17: agents[0].schedules[4].overlap: must be one of skip, queue, replace; got "pile"`,
				`config.yaml:19: agents[0].schedules[5].cron: bad cron "@every -1s": @every needs at least 1s; got -1s`,
				`config.yaml:20: agents[0].schedules[5].jitter: negative duration "-1m"`,
				`config.yaml:21: agents[0].schedules[6].cron: required`,
			},
		},
		{
			name: "subscriptions and publish",
			yaml: `
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - name: a
    model: fake
    publish: ["ops.>", "bad subject"]
    subscribe:
      - subject: alerts.>
        mode: wake
      - mode: deferred
`,
			want: []string{
				`config.yaml:6: agents[0].publish[1]: NATS subject "bad subject" contains whitespace`,
				`config.yaml:9: agents[0].subscribe[0].mode: must be one of inbox, deferred; got "wake"`,
				`config.yaml:10: agents[0].subscribe[1].subject: required: a NATS subject`,
			},
		},
		{
			name: "tools",
			yaml: `
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - name: a
    model: fake
    tools:
      - publish
      - shell
      - publish
`,
			want: []string{
				`config.yaml:8: agents[0].tools[1]: unknown tool "shell" (known: schedule_next_turn, report_done, publish, http_get, spawn_subagent, stop_subagent)`,
				`config.yaml:9: agents[0].tools[2]: tool "publish" is listed twice`,
			},
		},
		{
			name: "watchdog budgets inbox turn",
			yaml: `
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - name: a
    model: fake
    watchdog: {mode: kill}
    budgets:
      turn_usd: -0.5
      daily_usd: 3
    inbox: {cap: -1}
    turn:
      max_per_wake: -2
      history_turns: -3
`,
			want: []string{
				`config.yaml:6: agents[0].watchdog.mode: must be one of off, warn, feedback, enforce; got "kill"`,
				"config.yaml:8: agents[0].budgets.turn_usd: must not be negative; got -0.5",
				"config.yaml:10: agents[0].inbox.cap: must be at least 1; got -1",
				"config.yaml:12: agents[0].turn.max_per_wake: must be at least 1; got -2",
				"config.yaml:13: agents[0].turn.history_turns: must be at least 1; got -3",
			},
		},
		{
			name: "log nats store",
			yaml: `
log: {format: xml, level: trace}
nats:
  max_message_bytes: -1
store:
  url: postgres://db
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - {name: a, model: fake}
`,
			want: []string{
				`config.yaml:1: log.format: must be one of text, json; got "xml"`,
				`config.yaml:1: log.level: must be one of debug, info, warn, error; got "trace"`,
				"config.yaml:3: nats.max_message_bytes: must be at least 1; got -1",
				`config.yaml:5: store.url: scheme must be one of nats, redis, rediss, redis+sentinel, rediss+sentinel, redis+cluster, rediss+cluster, memory; got "postgres://db"`,
			},
		},
		{
			name: "alertmanager max bytes",
			yaml: `
api:
  alertmanager_max_bytes: -1
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - {name: a, model: fake, wake_on_resolved: true}
`,
			want: []string{
				"config.yaml:2: api.alertmanager_max_bytes: must be at least 1; got -1",
			},
		},
		{
			name: "max inflight bytes below the alertmanager limit",
			yaml: `
api:
  alertmanager_max_bytes: 8388608
  max_inflight_bytes: 4194304
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - {name: a, model: fake}
`,
			want: []string{
				"config.yaml:3: api.max_inflight_bytes: must be at least api.alertmanager_max_bytes (8388608), or no Alertmanager notification that large could ever be admitted; got 4194304",
			},
		},
		{
			name: "max inflight bytes below the other routes' limit",
			yaml: `
api:
  alertmanager_max_bytes: 1024
  max_inflight_bytes: 2048
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - {name: a, model: fake}
`,
			want: []string{
				"config.yaml:3: api.max_inflight_bytes: must be at least 65536, the body limit of the other API routes, or no request that large could ever be admitted; got 2048",
			},
		},
		{
			name: "max inflight bytes negative",
			yaml: `
api: {max_inflight_bytes: -5}
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - {name: a, model: fake}
`,
			want: []string{
				"config.yaml:1: api.max_inflight_bytes: must be at least 1; got -5",
			},
		},
		{
			name: "store url without scheme",
			yaml: `
store: {url: "localhost:6379"}
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - {name: a, model: fake}
`,
			want: []string{`config.yaml:1: store.url: want SCHEME://..., with scheme one of nats, redis, rediss, redis+sentinel, rediss+sentinel, redis+cluster, rediss+cluster, memory; got "localhost:6379"`},
		},
		{
			name: "api tokens",
			yaml: `
api:
  tokens:
    - {name: ok, role: read, value_env: TOKEN}
    - name: both
      role: admin
      value_env: TOKEN
      value_file: /run/token
    - name: neither
      role: operate
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - {name: a, model: fake}
`,
			want: []string{
				"config.yaml:4: api.tokens[1]: needs exactly one of value_env, value_file",
				`config.yaml:5: api.tokens[1].role: must be one of read, ingest, operate; got "admin"`,
				"config.yaml:8: api.tokens[2]: needs exactly one of value_env, value_file",
			},
		},
		{
			name: "reachable beyond loopback without credentials",
			yaml: `
nats:
  listen: 0.0.0.0:4222
api:
  listen: 0.0.0.0:8080
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - {name: a, model: fake}
`,
			want: []string{
				`config.yaml:2: nats.listen: the embedded NATS server on "0.0.0.0:4222" is reachable beyond loopback without authentication: anyone who can reach it could publish to inboxes, pause agents and read the state store; set nats.token_env or nats.token_file (or nats.user with password_env/password_file, or nats.nkey_file), or listen on 127.0.0.1`,
				`config.yaml:4: api.listen: "0.0.0.0:8080" is reachable beyond loopback and api.tokens is empty: anyone who can reach it could pause agents and add budget; add a token to api.tokens or listen on 127.0.0.1`,
			},
		},
		{
			name: "http_get prefixes as the tool reads them",
			yaml: `
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - name: a
    model: fake
    tools: [http_get]
    http_get: ["https://status.example.com/api/", "ftp://files.example.com/", "https://x.example.com/a%2fb/", "https://q.example.com/?x=1"]
`,
			want: []string{
				`config.yaml:7: agents[0].http_get[1]: http_get prefix "ftp://files.example.com/": not an http or https URL`,
				`config.yaml:7: agents[0].http_get[2]: http_get prefix "https://x.example.com/a%2fb/": encoded slashes (%2f, %5c) are not allowed in the path`,
				`config.yaml:7: agents[0].http_get[3]: http_get prefix "https://q.example.com/?x=1": a prefix may not have a query or fragment`,
			},
		},
		{
			name: "malformed listen addresses",
			yaml: `
nats: {listen: "nonsense"}
api: {listen: "127.0.0.1:99999"}
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - {name: a, model: fake}
`,
			want: []string{
				`config.yaml:1: nats.listen: want host:port (e.g. 127.0.0.1:8080) or -1 for a random port; got "nonsense"`,
				`config.yaml:2: api.listen: bad port "99999": want host:port (e.g. 127.0.0.1:8080)`,
			},
		},
		{
			name: "token scopes and nats secrets",
			yaml: `
nats:
  listen: 10.0.0.5:4222
  token_env: NATS_TOKEN
  token_file: /run/nats-token
api:
  tokens:
    - {name: am, role: ingest, value_env: T, agents: [oncall, "pay-*", "[", ghost]}
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - {name: oncall, model: fake}
  - {name: pay-eu, model: fake}
`,
			want: []string{
				"config.yaml:4: nats.token_file: set one of token_env, token_file",
				`config.yaml:7: api.tokens[0].agents[2]: bad glob "[": syntax error in pattern`,
				`config.yaml:7: api.tokens[0].agents[3]: "ghost" matches no configured agent`,
			},
		},
		{
			name: "pricing",
			yaml: `
pricing:
  gpt-4.1-mini:
    input_per_mtok: 0.4
    output_per_mtok: -1.6
  fake: {cached_input_per_mtok: -0.1}
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - {name: a, model: fake}
`,
			want: []string{
				`config.yaml:4: pricing["gpt-4.1-mini"].output_per_mtok: must not be negative; got -1.6`,
				"config.yaml:5: pricing.fake.cached_input_per_mtok: must not be negative; got -0.1",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, got := loadText(t, tt.yaml)
			if c != nil {
				t.Error("Load returned a config along with errors")
			}
			assertErrors(t, got, tt.want)
		})
	}
}

// A config with several unrelated problems reports all of them at once, in
// line order.
func TestAllProblemsReported(t *testing.T) {
	t.Parallel()
	_, got := loadText(t, `
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - name: a
    model: fake
    inbox: {cap: -5}
  - name: b
    model: nope
    watchdog: {mode: loud}
`)
	assertErrors(t, got, []string{
		"config.yaml:6: agents[0].inbox.cap: must be at least 1; got -5",
		`config.yaml:8: agents[1].model: unknown model "nope" (models: fake)`,
		`config.yaml:9: agents[1].watchdog.mode: must be one of off, warn, feedback, enforce; got "loud"`,
	})
}

// Validate on a Config built in code reports paths without lines.
func TestValidateInCode(t *testing.T) {
	t.Parallel()
	c := Default()
	c.Agents[0].Inbox.Cap = 0
	c.ShutdownGrace = Duration(-time.Second)
	c.Agents = append(c.Agents, Agent{Name: "demo", Model: "demo", Inbox: Inbox{Cap: 1}, Turn: Turn{MaxPerWake: 1, HistoryTurns: 1}, Watchdog: Watchdog{Mode: "off"}})
	got := errorLines(t, "", c.Validate())
	assertErrors(t, got, []string{
		"shutdown_grace: must not be negative; got -1s",
		"agents[0].inbox.cap: must be at least 1; got 0",
		`agents[1].name: duplicate agent name "demo" (also agents[0])`,
	})
}

func TestCheckCronSteps(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec string
		ok   bool
	}{
		{"*/59 * * * *", true},
		{"*/60 * * * *", false},
		{"0 */23 * * *", true},
		{"0 */24 * * *", false},
		{"*/30 0 8 * * *", true}, // with seconds
		{"*/61 0 8 * * *", false},
		{"0 0 */31 * *", false},
		{"0 0 1 */12 *", false},
		{"0 0 * * */7", false},
		{"0 8 * * MON-FRI", true},
		{"TZ=Europe/Berlin */61 * * * *", false},
		{"@every 10m", true},
		{"@every 500ms", false},
		{"@hourly", true},
	}
	for _, tt := range tests {
		if err := checkCronSteps(tt.spec); (err == nil) != tt.ok {
			t.Errorf("checkCronSteps(%q) = %v, want ok=%v", tt.spec, err, tt.ok)
		}
	}
}

// TestAmountsMustBeFinite: YAML's .inf and .nan are numbers to a YAML
// parser but no amount of money: a ceiling or price of +Inf is refused
// with the key's line, as a negative one is.
func TestAmountsMustBeFinite(t *testing.T) {
	t.Parallel()
	_, errs := loadText(t, `
guardrails: {worker_daily_usd: .inf}
pricing:
  fake: {input_per_mtok: .nan}
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - name: a
    model: fake
    budgets: {daily_usd: .inf, turn_usd: -.inf}
    subagents: {budget_usd: .inf}
`)
	assertErrors(t, errs, []string{
		`config.yaml:1: guardrails.worker_daily_usd: must be a finite number; got +Inf`,
		`config.yaml:3: pricing.fake.input_per_mtok: must be a finite number; got NaN`,
		`config.yaml:9: agents[0].budgets.turn_usd: must be a finite number; got -Inf`,
		`config.yaml:9: agents[0].budgets.daily_usd: must be a finite number; got +Inf`,
		`config.yaml:10: agents[0].subagents.budget_usd: must be a finite number; got +Inf`,
	})
}
