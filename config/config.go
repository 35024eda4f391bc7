// Package config holds the YAML schema of agent-worker, its defaults, ${ENV}
// expansion and validation. Every problem in a file is reported as
// "file:line: message"; loading never stops at the first one.
//
// The package describes configuration only: it must not import the runtime
// packages (driver, inbox, models, ...), which take the values they need from
// these types.
package config

import (
	"fmt"
	"strings"
	"time"
)

// Config is one agent-worker configuration file after defaults are applied.
type Config struct {
	// DataDir is where durable state lives (JetStream files, the KV store).
	// Default "./data".
	DataDir string `yaml:"data_dir"`
	// ShutdownGrace is how long a running turn may take to finish after
	// SIGTERM before it is cancelled. Default 30s.
	ShutdownGrace Duration `yaml:"shutdown_grace"`
	Log           Log      `yaml:"log"`
	NATS          NATS     `yaml:"nats"`
	Store         Store    `yaml:"store"`
	API           API      `yaml:"api"`
	// Seal names the deployment's sealing key (seal.go).
	Seal Seal `yaml:"seal"`
	// Models are named model definitions that agents refer to by name.
	Models map[string]Model `yaml:"models"`
	// MCPServers are the MCP servers whose tools agents may be granted
	// (agents[].mcp), by name (mcp.go).
	MCPServers map[string]MCPServer `yaml:"mcp_servers"`
	// Pricing maps a model name (exact, then longest prefix) to its price.
	Pricing    map[string]Price `yaml:"pricing"`
	Lease      Lease            `yaml:"lease"`
	Guardrails Guardrails       `yaml:"guardrails"`
	// Subagents is this replica's share of running every agent's
	// subagents (agents[].subagents bounds each agent's own).
	Subagents ReplicaSubagents `yaml:"subagents"`
	Events    Events           `yaml:"events"` // the durable events stream (events.go)
	Memory    Memory           `yaml:"memory"` // every agent's running memory, by default (memory.go)
	Agents    []Agent          `yaml:"agents"`
	// Webhooks are the generic webhooks, by name (webhooks.go).
	Webhooks map[string]Webhook `yaml:"webhooks"`

	// Metrics is what /metrics exposes per agent (metrics.go).
	Metrics Metrics `yaml:"metrics"`
	// Telemetry configures OpenTelemetry traces (telemetry.go).
	Telemetry Telemetry `yaml:"telemetry"`

	// File is the path the configuration was read from ("" for the
	// embedded default). Not a YAML key.
	File string `yaml:"-"`
	// lines maps a field path to its line in File (Where).
	lines map[string]int
}

// Written reports whether the file sets the field at path (not a
// default).
func (c *Config) Written(path string) bool {
	_, ok := c.lines[path]
	return ok
}

// Where is "file:line: path" for a field path as validate writes it
// ("agents[0].budgets.daily_usd"): the line of the nearest key of it
// that the file has; just the path for a Config not read from a file.
func (c *Config) Where(path string) string {
	if l := c.line(path); l > 0 && c.File != "" {
		return fmt.Sprintf("%s:%d: %s", c.File, l, path)
	}
	return path
}

// line is the line of the nearest key of path that the file has; 0 when
// it has none.
func (c *Config) line(path string) int {
	for p := path; ; {
		if l, ok := c.lines[p]; ok {
			return l
		}
		i := strings.LastIndexAny(p, ".[")
		if i <= 0 {
			return 0
		}
		p = p[:i]
	}
}

// Agent returns the agent called name, pointing into c.Agents, and whether
// there is one.
func (c *Config) Agent(name string) (*Agent, bool) {
	for i := range c.Agents {
		if c.Agents[i].Name == name {
			return &c.Agents[i], true
		}
	}
	return nil, false
}

// Log selects the log format and level.
type Log struct {
	// Format is "text" (default) or "json".
	Format string `yaml:"format"`
	// Level is "debug", "info" (default), "warn" or "error".
	Level string `yaml:"level"`
}

// NATS configures the worker's NATS connection, or the embedded server when
// URL is empty.
type NATS struct {
	// URL of an external NATS; empty runs an embedded server.
	URL string `yaml:"url"`
	// Listen is the embedded server's client address. Default
	// "127.0.0.1:4222"; "-1" picks a random port.
	Listen string `yaml:"listen"`
	// SubjectPrefix is the first token of every agent subject. Default "agents".
	SubjectPrefix string `yaml:"subject_prefix"`
	// Stream is the JetStream stream holding the agents' input, a log
	// with limits retention: each agent's cursor (the last sequence it
	// handled, kept in its turn record) says what it has handled, and one
	// router per replica reads the stream. The worker creates it, and
	// converts a stream of the older interest-retention layout in place.
	// Default "AGENTS".
	Stream string `yaml:"stream"`
	// MaxMsgsPerSubject is how many messages Stream keeps per subject
	// (one agent's inbox, its deferred input, each subject its subscribe
	// patterns match). New messages are discarded per subject: when one
	// agent's backlog is full, only its own publishers are refused; the
	// other agents' input still flows. Zero (the default): 100,000; -1:
	// no limit; otherwise at least 1.
	MaxMsgsPerSubject int `yaml:"max_msgs_per_subject"`
	// MaxBytes bounds the size of Stream. New messages are discarded:
	// when it is full every publish is refused. The worker's own
	// publishers (the API, send, the Alertmanager receiver, subagent
	// reports, DLQ replay) return the refusal as an error; a core-NATS
	// publish is dropped by the server without a word to its publisher.
	// Zero (the default): 1 GiB; -1: no limit; otherwise at least 1 MiB
	// and at least MaxMessageBytes.
	MaxBytes int64 `yaml:"max_bytes"`
	// MaxAge is how long Stream keeps a message: one not handled by then
	// is removed unhandled. Zero (the default): no maximum age, a message
	// stays until its agent handles it. Otherwise at least 1m.
	MaxAge Duration `yaml:"max_age"`
	// MaxMessageBytes bounds an inbound body. Default 65536.
	MaxMessageBytes int `yaml:"max_message_bytes"`
	// ReadAheadBytes bounds the input each replica keeps in memory for
	// the agents it serves, from its router to their next turn, so that a
	// turn reads its input without asking the stream. When it is full the
	// oldest is let go (read from the stream when its turn comes): nothing
	// is lost. Zero (the default): 32 MiB; -1: nothing kept, every read
	// asks the stream; otherwise at least MaxMessageBytes.
	ReadAheadBytes int64 `yaml:"read_ahead_bytes"`
	// DLQMaxAge and DLQMaxBytes bound the dead-letter stream (<stream>_DLQ
	// over <prefix>.*.dlq, JetStream mode): dead letters older, or beyond
	// the size, are removed oldest first. Defaults 168h and 256 MiB.
	DLQMaxAge   Duration `yaml:"dlq_max_age"`
	DLQMaxBytes int64    `yaml:"dlq_max_bytes"`
	// JetStream turns durable delivery on (default true; nil after Load
	// only if defaults were not applied).
	JetStream *bool `yaml:"jetstream"`
	// DuplicateWindow is JetStream's dedup window. Default 2m.
	DuplicateWindow Duration `yaml:"duplicate_window"`
	// Replicas is how many copies JetStream keeps of each stream and KV
	// bucket the worker creates: the input stream (Stream), the subagent
	// work queue (<Stream>_SUBAGENTS) and, with store.url nats://, the
	// state buckets. 1, 3 or 5; default 1. It needs an external JetStream
	// cluster (URL) of at least that many servers: with 3, every asset
	// stays readable and writable while any one server of the three is
	// down (two while one of five is), and a message JetStream acked is
	// on a majority of the copies, so it is not lost with the server that
	// took it. An existing stream or bucket created with another count is
	// changed to this one in place.
	Replicas int `yaml:"replicas"`
	// AckWait is how long the server waits for an ack of a subagent job
	// (<Stream>_SUBAGENTS) before redelivering it. Running jobs are kept
	// alive with in-progress acks (every third of it), so this bounds only
	// how soon a crashed replica's subagent jobs are redelivered. Default
	// 10s. It no longer applies to agents' input, which has no ack
	// deadline: a new owner reads on from the agent's cursor as soon as it
	// holds the lease (Lease.TTL); Warnings says so when the file sets it.
	AckWait Duration `yaml:"ack_wait"`
	// MaxConsumers is accepted so that older files load, and ignored:
	// agents no longer hold consumers on Stream (one router per replica
	// reads it). Warnings says so when the file sets it.
	//
	// Deprecated: the key is ignored.
	MaxConsumers int `yaml:"max_consumers"`
	// HandledIDs is accepted so that older files load, and ignored:
	// handled messages are no longer recorded by id, a message is handled
	// when its sequence is at or below its agent's cursor. Warnings says
	// so when the file sets it.
	//
	// Deprecated: the key is ignored.
	HandledIDs int `yaml:"handled_ids"`
	// Authentication. With an external server (URL set) these are the
	// worker's credentials. With the embedded server they are also what
	// the server requires of every client — required when Listen is
	// beyond loopback: a token, a user and password, or an NKey (the
	// seed's public key is the user). Secrets come from an environment
	// variable (…_env) or a file (…_file), never from the YAML.
	CredsFile    string `yaml:"creds_file"`
	NKeyFile     string `yaml:"nkey_file"`
	User         string `yaml:"user"`
	PasswordEnv  string `yaml:"password_env"`
	PasswordFile string `yaml:"password_file"`
	TokenEnv     string `yaml:"token_env"`
	TokenFile    string `yaml:"token_file"`
	TLS          TLS    `yaml:"tls"`
}

// InputLimits are the bounds of the input stream (Stream) in JetStream's
// terms, whether or not defaults were applied: a zero MaxMsgsPerSubject
// or MaxBytes is its default, and -1 (any negative value) means no limit,
// as JetStream's StreamConfig has it. maxAge 0 means no maximum age, as
// JetStream's MaxAge has it.
func (n NATS) InputLimits() (maxMsgsPerSubject int64, maxBytes int64, maxAge time.Duration) {
	limit := func(v, def int64) int64 {
		switch {
		case v < 0:
			return -1
		case v == 0:
			return def
		}
		return v
	}
	return limit(int64(n.MaxMsgsPerSubject), defaultMaxMsgsPerSubject), limit(n.MaxBytes, defaultInputMaxBytes), max(n.MaxAge.D(), 0)
}

// EmbeddedOnLoopback reports whether the worker runs its embedded NATS
// server (no url) and it listens on this machine only: "-1" or "" (a free
// port on 127.0.0.1) or a loopback address. Then nobody off the machine
// can publish to it.
func (n NATS) EmbeddedOnLoopback() bool {
	return n.URL == "" && (n.Listen == "-1" || n.Listen == "" || IsLoopback(n.Listen))
}

// Authenticated reports whether n names credentials a server can check:
// a token, a user with a password, an NKey seed or a creds file.
func (n NATS) Authenticated() bool {
	return n.TokenEnv != "" || n.TokenFile != "" || n.NKeyFile != "" || n.CredsFile != "" ||
		(n.User != "" && (n.PasswordEnv != "" || n.PasswordFile != ""))
}

// TLS names the files of a TLS client configuration.
type TLS struct {
	CAFile   string `yaml:"ca_file"`
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// Store selects the durable state store by URL scheme: "nats://" (KV
// buckets on the worker's NATS), "redis://" or "rediss://", or "memory://"
// (nothing survives a restart; for tests).
type Store struct {
	// URL selects the store and where it is. Default "nats://".
	// Redis: redis://[user@]host:6379/0, rediss:// (TLS),
	// redis+sentinel://s1:26379,s2:26379/master/0,
	// redis+cluster://n1:6379,n2:6379 (and rediss+ forms).
	URL string `yaml:"url"`
	// PasswordEnv names the environment variable holding the Redis
	// password (instead of putting it in the URL).
	PasswordEnv string `yaml:"password_env"`
	// SentinelPasswordEnv names the variable holding the Sentinels' own
	// password.
	SentinelPasswordEnv string `yaml:"sentinel_password_env"`
	// TLS configures rediss* connections (a private CA, a client cert).
	TLS TLS `yaml:"tls"`
}

// API configures the operator HTTP API.
type API struct {
	// Listen is the API's address. Default "127.0.0.1:8080".
	Listen string  `yaml:"listen"`
	Tokens []Token `yaml:"tokens"`
	// OpenPaths are served without a token. Default /healthz, /readyz,
	// /metrics. Add "/" to open the status page to browsers.
	OpenPaths []string `yaml:"open_paths"`
	// AlertmanagerMaxBytes bounds an Alertmanager webhook payload the
	// receiver reads (413 beyond). Default 4194304 (4 MiB). What is queued
	// is cut to nats.max_message_bytes, the least severe alerts left out.
	AlertmanagerMaxBytes int `yaml:"alertmanager_max_bytes"`
	// MaxInflightBytes bounds the request bodies the API holds at once, of
	// all requests together: each reserves its Content-Length (its route's
	// limit when chunked) before it is read and frees it when answered; a
	// request that does not fit is answered 503 with Retry-After, never
	// queued. Default 16777216 (16 MiB): four maximal Alertmanager
	// payloads at once, each of which costs about ten times its size in
	// memory while it is handled (api.DefaultMaxInflightBytes). At least
	// alertmanager_max_bytes and MaxAPIBodyBytes, so every request the
	// limits allow can pass alone.
	MaxInflightBytes int `yaml:"max_inflight_bytes"`
}

// MaxAPIBodyBytes is the body limit of every API route but the
// Alertmanager receiver (413 beyond); it is not configurable.
const MaxAPIBodyBytes = 64 << 10

// Token is a bearer token. Its value comes from an environment variable or
// a file, never from the YAML itself.
type Token struct {
	Name string `yaml:"name"`
	// Role is "read" (GET only), "ingest" (POST messages and the
	// Alertmanager receiver only) or "operate" (everything).
	Role      string `yaml:"role"`
	ValueEnv  string `yaml:"value_env"`
	ValueFile string `yaml:"value_file"`
	// Agents limits the token to these agents: names, or globs such as
	// "payments-*". Empty: every agent. Outside its scope a token gets
	// 403.
	Agents []string `yaml:"agents"`
}

// Model is a named model definition.
type Model struct {
	// Provider is "scripted", "openai", "gemini" or "anthropic".
	Provider string `yaml:"provider"`
	// Model is the provider's model name, and the name pricing looks up.
	// Required for real providers; a scripted model defaults to its key.
	Model string `yaml:"model"`
	// BaseURL points an openai model at any OpenAI-compatible server
	// (Ollama, vLLM, LiteLLM) or a proxy; "" is the provider's own API.
	BaseURL string `yaml:"base_url"`
	// APIKeyEnv or APIKeyFile name where the API key is; it is never
	// written in the config. Optional for openai with a base_url (local
	// servers often need none).
	APIKeyEnv  string `yaml:"api_key_env"`
	APIKeyFile string `yaml:"api_key_file"`
	// Timeout bounds one request (each retry gets its own). Default 120s.
	Timeout Duration `yaml:"timeout"`
	// Retry governs retries of 429 and 5xx answers.
	Retry Retry `yaml:"retry"`
	// Headers are extra HTTP headers sent with every request.
	Headers map[string]string `yaml:"headers"`
	// MaxTokens bounds a response (anthropic requires one). Default 4096.
	MaxTokens int `yaml:"max_tokens"`
	// Vertex selects Vertex AI for gemini, with Project and Location.
	Vertex   bool   `yaml:"vertex"`
	Project  string `yaml:"project"`
	Location string `yaml:"location"`
	// Reasoning is "low", "medium" or "high": the reasoning effort or
	// thinking budget of every request, in the provider's own parameter
	// (openai reasoning_effort; anthropic thinking.budget_tokens 1024,
	// 4096 or 16384, added to max_tokens; gemini thinkingBudget, same
	// numbers). "" sends nothing: the provider's default. Not for
	// scripted.
	Reasoning string `yaml:"reasoning"`
	// Fallback is the key of another model used for a call whose retries
	// against this one are exhausted (the provider is down): logged,
	// counted, evented and charged at the fallback's own price. It may
	// have a fallback of its own; a chain must not loop. "": none.
	Fallback string `yaml:"fallback"`

	// Script is the scripted provider's responses, one per model call.
	Script []ScriptStep `yaml:"script"`
	// ScriptFile names a YAML file holding the script (a list of steps),
	// relative to the config file. Loaded into Script by Load, so after
	// Load both are set; the file is not ${ENV}-expanded. A scripted model
	// sets exactly one of Script, ScriptFile and Behaviour.
	ScriptFile string `yaml:"script_file"`
	// Loop restarts the script when it ends; otherwise the call after the
	// last step fails.
	Loop bool `yaml:"loop"`
	// Behaviour selects a built-in scripted behaviour instead of a script:
	// "demo".
	Behaviour string `yaml:"behaviour"`
}

// Retry is a provider's retry policy for 429 and 5xx answers (honouring
// Retry-After), with exponential backoff and jitter.
type Retry struct {
	// Max is how many retries follow the first attempt. Default 3.
	Max *int `yaml:"max"`
	// Base is the first backoff. Default 500ms.
	Base Duration `yaml:"base"`
	// MaxWait caps one backoff (and a Retry-After). Default 30s.
	MaxWait Duration `yaml:"max_wait"`
}

// ScriptStep is one scripted model response.
type ScriptStep struct {
	// Text is the response text.
	Text string `yaml:"text"`
	// Call is a function call the model makes.
	Call *Call `yaml:"call"`
	// Usage is the token usage the response reports.
	Usage Usage `yaml:"usage"`
	// Error makes the model call fail with this message.
	Error string `yaml:"error"`
	// Hang blocks the call until its context is cancelled.
	Hang bool `yaml:"hang"`
	// Delay makes the call take this long (real time) before it answers
	// with the step's text, call or error; a cancelled context ends the
	// wait early. For demos and fault tests where turns must take time.
	Delay Duration `yaml:"delay"`
	// Line is the step's line in its file, for error messages.
	Line int `yaml:"-"`
}

// Call is a scripted function call.
type Call struct {
	Name string         `yaml:"name"`
	Args map[string]any `yaml:"args"`
}

// Usage is a token count.
type Usage struct {
	Input       int `yaml:"input"`
	CachedInput int `yaml:"cached_input"`
	Output      int `yaml:"output"`
}

// Price is a model's price in USD per million tokens.
type Price struct {
	InputPerMTok       float64 `yaml:"input_per_mtok"`
	CachedInputPerMTok float64 `yaml:"cached_input_per_mtok"`
	OutputPerMTok      float64 `yaml:"output_per_mtok"`
	// CacheWritePerMTok prices tokens written to a provider's prompt
	// cache (Anthropic); 0 means the input price.
	CacheWritePerMTok float64 `yaml:"cache_write_per_mtok"`
}

// Agent is one configured agent.
type Agent struct {
	// Name is [a-z0-9_-]+, usable as a NATS subject token.
	Name string `yaml:"name"`
	// Model is a key of Config.Models.
	Model       string `yaml:"model"`
	Instruction string `yaml:"instruction"`
	// Tools are built-in tool names granted to the agent.
	Tools []string `yaml:"tools"`
	// MCP grants tools of MCP servers (mcp.go).
	MCP []AgentMCP `yaml:"mcp"`
	// Approval lists tools (built-in, or MCP as the model sees them)
	// whose calls wait for an operator's approval; ApprovalTTL is how long
	// a held call waits before it expires. Default 1h.
	Approval    []string `yaml:"approval"`
	ApprovalTTL Duration `yaml:"approval_ttl"`
	// Publish lists subject patterns the publish tool may use.
	Publish []string `yaml:"publish"`
	// HTTPGet lists the URL prefixes the http_get tool may read
	// ("https://status.example.com/api/"). Required with http_get.
	HTTPGet []string `yaml:"http_get"`
	// HTTPGetAllowPrivate lets http_get reach loopback and private
	// addresses (10/8, 172.16/12, 192.168/16, fc00::/7, ...), checked on
	// the address actually dialled. Link-local addresses, cloud metadata
	// (169.254.169.254) among them, stay refused. Default false.
	HTTPGetAllowPrivate bool           `yaml:"http_get_allow_private"`
	Subscribe           []Subscription `yaml:"subscribe"`
	Schedules           []Schedule     `yaml:"schedules"`
	Sleep               Sleep          `yaml:"sleep"`
	Budgets             Budgets        `yaml:"budgets"`
	Watchdog            Watchdog       `yaml:"watchdog"`
	Limits              Limits         `yaml:"limits"`
	Subagents           Subagents      `yaml:"subagents"`
	Memory              Memory         `yaml:"memory"` // overrides the top-level memory: (memory.go)
	Inbox               Inbox          `yaml:"inbox"`
	// WakeOnStart runs one turn when the worker starts (default false:
	// an agent sleeps until a real wake source, so a restart costs no
	// turn).
	WakeOnStart bool `yaml:"wake_on_start"`
	// WakeOnResolved makes an Alertmanager notification whose alerts are
	// all resolved wake the agent (default false: it waits, deferred, for
	// the next turn).
	WakeOnResolved bool `yaml:"wake_on_resolved"`
	Turn           Turn `yaml:"turn"`
	// ReplicaAffinity pins the agent to the replicas whose lease.holder
	// it matches: a holder name or a glob ("eu-*"). Only a matching
	// replica takes the agent while one is live; if none is, any replica
	// takes it once its lease expires, and hands it back when a matching
	// one returns. Empty: any replica.
	ReplicaAffinity string `yaml:"replica_affinity"`
}

// Subscription binds an existing NATS subject to the agent.
type Subscription struct {
	// Subject may use NATS wildcards ("alerts.payments.>"). Required.
	Subject string `yaml:"subject"`
	// Mode is "inbox" (wakes the agent, default) or "deferred".
	Mode string `yaml:"mode"`
}

// Schedule is a cron schedule that wakes the agent.
type Schedule struct {
	Name string `yaml:"name"`
	// Cron is a 5-field spec, an optional leading seconds field, or a
	// descriptor such as "@every 10m" or "@daily".
	Cron string `yaml:"cron"`
	// Timezone is an IANA name. Default "UTC".
	Timezone string `yaml:"timezone"`
	// Prompt is the text the agent is woken with.
	Prompt string `yaml:"prompt"`
	// Overlap is "skip" (default), "queue" or "replace": what a tick does
	// when the agent is still running a turn.
	Overlap string `yaml:"overlap"`
	// Jitter delays each tick by a random amount up to this. Default 0.
	Jitter Duration `yaml:"jitter"`
	// Enabled defaults to true.
	Enabled *bool `yaml:"enabled"`
}

// Sleep bounds how long the agent sleeps between turns.
type Sleep struct {
	// Min is the floor for a model-requested wake, so a model asking for
	// "now" again and again cannot spin. Default 10s (or sleep.default or
	// sleep.max when either is shorter).
	Min Duration `yaml:"min"`
	// Default is the heartbeat used when a turn asks for no wake; zero
	// means none: the agent sleeps until another wake source.
	Default Duration `yaml:"default"`
	// Max is the ceiling for a model-requested wake. Default 24h.
	Max Duration `yaml:"max"`
}

// Budgets are cost ceilings in USD; zero means no ceiling.
type Budgets struct {
	TurnUSD    float64 `yaml:"turn_usd"`
	SessionUSD float64 `yaml:"session_usd"`
	DailyUSD   float64 `yaml:"daily_usd"`
}

// Watchdog configures loop detection.
type Watchdog struct {
	// Mode is "off", "warn" (log, count, event), "feedback" (also tell the
	// model in its next prompt) or "enforce" (also halt the agent at once;
	// the default for unattended agents).
	Mode string `yaml:"mode"`
	// Repeat: the same call this many times in a row. Default 5.
	Repeat int `yaml:"repeat"`
	// CycleRepeats: a cycle of 2-4 calls repeated this many times.
	// Default 3.
	CycleRepeats int `yaml:"cycle_repeats"`
	// Dominant of the last Window calls being one call. Defaults 8 of 12.
	Dominant int `yaml:"dominant"`
	Window   int `yaml:"window"`
	// Failures: a streak of failing calls (warning only). Default 3.
	Failures int `yaml:"failures"`
	// TurnRepeat: the same tool calls, in the same order and with the
	// same arguments, in this many turns in a row, each woken only by a
	// wake the model asked for at sleep.min or sooner — a loop spread
	// across turns. Default 5.
	TurnRepeat int `yaml:"turn_repeat"`
}

// Limits cap one turn besides money; a turn that reaches one is stopped
// (not the agent), and the next prompt says why.
type Limits struct {
	// ModelCallsPerTurn. Default 50.
	ModelCallsPerTurn int `yaml:"model_calls_per_turn"`
	// ToolCallsPerTurn. Default 100.
	ToolCallsPerTurn int `yaml:"tool_calls_per_turn"`
	// TokensPerTurn counts input plus output tokens of every model call.
	// Default 500000.
	TokensPerTurn int `yaml:"tokens_per_turn"`
	// TurnsPerHour bounds the agent's turns, whatever wakes it; beyond it
	// the next turn waits (the model is told). Default 360: one every 10s
	// sustained, the sleep.min floor, so it binds on turns that input
	// drives (a burst of messages, an agent publishing to itself), not on
	// an agent that sleeps as asked.
	TurnsPerHour int `yaml:"turns_per_hour"`
	// TurnBurst is how many turns may run back to back before
	// turns_per_hour spaces them. Default 20.
	TurnBurst int `yaml:"turn_burst"`
}

// Subagents bound the background subagents an agent may spawn with the
// spawn_subagent tool. Their spend counts against the agent's ceilings.
type Subagents struct {
	// Max is how many may run at once. Default 3.
	Max int `yaml:"max"`
	// Depth is how deep spawning nests; subagents never spawn in this
	// version, so only 1 is meaningful. Default 1.
	Depth int `yaml:"depth"`
	// BudgetUSD stops one subagent that has cost this much; 0 = none.
	BudgetUSD float64 `yaml:"budget_usd"`
	// Timeout stops one subagent that runs longer. Default 10m.
	Timeout Duration `yaml:"timeout"`
	// Model is the key of the model subagents use. Default: the agent's.
	Model string `yaml:"model"`
	// Tools are the built-in tools subagents get. Default none.
	Tools []string `yaml:"tools"`
	// Instruction is prepended to each subagent's task.
	Instruction string `yaml:"instruction"`
}

// ReplicaSubagents is how many subagents, of any agent, this replica runs.
// With JetStream, subagents are jobs in a work queue that every replica
// takes from while it has room, wherever their parent runs.
type ReplicaSubagents struct {
	// MaxPerReplica is how many subagents this replica runs at once; 0
	// runs none here (its agents' subagents run on other replicas).
	// Default 8. Without JetStream every subagent runs on its parent's
	// replica and only agents[].subagents.max bounds them.
	MaxPerReplica *int `yaml:"max_per_replica"`
}

// Lease gives each agent one owner among replicas sharing a store.
type Lease struct {
	// Holder names this replica. Default: the host name (a pod's name),
	// so a restarted process takes its own lease back at once.
	Holder string `yaml:"holder"`
	// TTL is how long a lease outlives its holder. A dead replica's agents
	// move within TTL plus a third of it. Default 15s.
	TTL Duration `yaml:"ttl"`
	// Heartbeat is how often this replica announces itself to the others
	// on <nats.subject_prefix>._members; a replica not heard from for 3
	// heartbeats is taken as gone, and the agents are divided among the
	// replicas heard from. At most a third of TTL. Default 1s.
	Heartbeat Duration `yaml:"heartbeat"`
}

// Guardrails are worker-wide guardrail settings.
type Guardrails struct {
	// Timezone whose calendar day the daily ceilings follow. Default UTC.
	Timezone string `yaml:"timezone"`
	// WorkerDailyUSD is a ceiling across all agents per day; 0 = none.
	WorkerDailyUSD float64 `yaml:"worker_daily_usd"`
}

// Inbox bounds the agent's queue.
type Inbox struct {
	// Cap is the most messages held; the oldest are dropped beyond it.
	// Default 256.
	Cap int `yaml:"cap"`
}

// Turn bounds one turn.
type Turn struct {
	// Timeout cancels a turn that runs longer. Default 10m.
	Timeout Duration `yaml:"timeout"`
	// MaxPerWake is how many turns may run back to back (wakes that landed
	// during a turn) before the agent must sleep for max(sleep.min, 1s).
	// Default 10.
	MaxPerWake int `yaml:"max_per_wake"`
	// Coalesce makes a sleeping agent wait this long after the first
	// wake before its turn starts, so a burst of alerts about one incident
	// becomes one turn. Default 0: the turn starts at once.
	Coalesce Duration `yaml:"coalesce"`
	// HistoryTurns is how many past turns are sent to the model, so the
	// prompt stays flat as the agent ages. Default 10.
	HistoryTurns int `yaml:"history_turns"`
	// Retry spaces the automatic retries of a failed turn.
	Retry TurnRetry `yaml:"retry"`
	// MaxInputBytes bounds the message text one turn takes; the rest
	// waits for the next turn, which follows at once (wake messages go
	// first, deferred fill what is left). One message is always taken,
	// whatever its size. Default 262144 (256 KiB).
	MaxInputBytes int `yaml:"max_input_bytes"`
	// ResumeWithin: a turn cut short (the worker killed, its lease lost,
	// a dependency down) is resumed from its journal by the agent's next
	// turn — recorded model responses and tool results replayed, not
	// redone — unless the journal is older than this; then it is
	// abandoned and its messages run in an ordinary turn. Default 1h.
	ResumeWithin Duration `yaml:"resume_within"`
}

// TurnRetry is the backoff between a failed turn and its retry: the n-th
// failure in a row waits a random time between half and all of
// min(max, base·2^(n-1)).
type TurnRetry struct {
	// Base is the first wait's ceiling. Default 2s.
	Base Duration `yaml:"base"`
	// Max caps every wait. Default 5m.
	Max Duration `yaml:"max"`
}

// Duration is a time.Duration written as "30s", "5m", "1h30m" in YAML.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }
