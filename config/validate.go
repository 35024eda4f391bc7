package config

import (
	"fmt"
	"net"
	pathpkg "path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/agent-worker/agent-worker/natsbus/subject"
	"github.com/agent-worker/agent-worker/tools/urlprefix"
)

// KnownTools are the built-in tool names an agent's tools list may grant.
var KnownTools = []string{"schedule_next_turn", "report_done", "publish", "http_get", "spawn_subagent", "stop_subagent"}

var (
	providers       = []string{"scripted", "openai", "gemini", "anthropic"}
	behaviours      = []string{"demo"}
	logFormats      = []string{"text", "json"}
	logLevels       = []string{"debug", "info", "warn", "error"}
	storeSchemes    = []string{"nats", "redis", "rediss", "redis+sentinel", "rediss+sentinel", "redis+cluster", "rediss+cluster", "memory"}
	tokenRoles      = []string{"read", "ingest", "operate"}
	subscribeModes  = []string{"inbox", "deferred"}
	overlapPolicies = []string{"skip", "queue", "replace"}
	watchdogModes   = []string{"off", "warn", "feedback", "enforce"}
	// natsReplicas are the replica counts nats.replicas allows: JetStream
	// takes up to 5, and an even count tolerates no more lost servers
	// than the odd count below it.
	natsReplicas = []int{1, 3, 5}

	// namePattern is the shape of agent and schedule names: they become
	// NATS subject tokens and metric label values.
	namePattern = regexp.MustCompile(`^[a-z0-9_-]+$`)
)

// cronParser accepts what the scheduler accepts: five fields, an optional
// leading seconds field, or a descriptor ("@daily", "@every 10m").
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Validate checks c as Load does, for a Config built or changed in code.
// It expects defaults to be applied (Default and Load do that): a zero
// inbox cap, for example, is an error here. Problems are returned as
// *Errors; their lines are 0 except for script steps, which carry their
// own, because the YAML's line map is gone by now.
func (c *Config) Validate() error {
	v := validator{file: c.File}
	v.config(c)
	return finish(c.File, v.errs)
}

// validator reports problems by field path; lines maps a path to its line
// and a problem falls back to the nearest parent that has one.
type validator struct {
	file   string
	lines  map[string]int
	failed map[string]bool
	errs   []Error
}

func (v *validator) line(p path) int {
	for n := len(p); n >= 0; n-- {
		if l, ok := v.lines[p[:n].String()]; ok {
			return l
		}
	}
	return 0
}

// at reports a problem at p, unless p or a parent could not be decoded (the
// decoder has said so already, and the zero value left behind would only
// add noise).
func (v *validator) at(p path, format string, args ...any) {
	v.atLine(v.file, v.line(p), p, format, args...)
}

func (v *validator) atLine(file string, line int, p path, format string, args ...any) {
	for n := len(p); n >= 0; n-- {
		if v.failed[p[:n].String()] {
			return
		}
	}
	v.errs = append(v.errs, Error{File: file, Line: line, Msg: p.String() + ": " + fmt.Sprintf(format, args...)})
}

func (v *validator) oneOf(p path, got string, allowed []string) {
	switch {
	case slices.Contains(allowed, got):
	case got == "":
		v.at(p, "required: one of %s", strings.Join(allowed, ", "))
	default:
		v.at(p, "must be one of %s; got %q", strings.Join(allowed, ", "), got)
	}
}

func (v *validator) duration(p path, d Duration) {
	if d < 0 {
		v.at(p, "must not be negative; got %s", d)
	}
}

func (v *validator) nonNegative(p path, f float64) {
	if f < 0 {
		v.at(p, "must not be negative; got %v", f)
	}
}

func (v *validator) atLeastOne(p path, n int) {
	if n < 1 {
		v.at(p, "must be at least 1; got %d", n)
	}
}

func (v *validator) config(c *Config) {
	var root path
	v.duration(root.key("shutdown_grace"), c.ShutdownGrace)
	v.oneOf(root.key("log", "format"), c.Log.Format, logFormats)
	v.oneOf(root.key("log", "level"), c.Log.Level, logLevels)

	v.atLeastOne(root.key("nats", "max_message_bytes"), c.NATS.MaxMessageBytes)
	if _, err := time.LoadLocation(c.Guardrails.Timezone); err != nil {
		v.at(root.key("guardrails", "timezone"), "unknown time zone %q", c.Guardrails.Timezone)
	}
	if c.Guardrails.WorkerDailyUSD < 0 {
		v.at(root.key("guardrails", "worker_daily_usd"), "must not be negative; got %v", c.Guardrails.WorkerDailyUSD)
	}
	if n := c.Subagents.MaxPerReplica; n != nil && *n < 0 {
		v.at(root.key("subagents", "max_per_replica"), "must not be negative; got %d", *n)
	}
	v.duration(root.key("nats", "duplicate_window"), c.NATS.DuplicateWindow)
	v.duration(root.key("nats", "ack_wait"), c.NATS.AckWait)
	v.duration(root.key("nats", "dlq_max_age"), c.NATS.DLQMaxAge)
	if c.NATS.DLQMaxBytes < 0 {
		v.at(root.key("nats", "dlq_max_bytes"), "must not be negative; got %d", c.NATS.DLQMaxBytes)
	}
	if c.Lease.TTL > 0 && c.Lease.TTL.D() < 3*time.Second {
		v.at(root.key("lease", "ttl"), "must be at least 3s; got %v", c.Lease.TTL.D())
	}
	switch hb := c.Lease.Heartbeat.D(); {
	case hb < 0:
		v.duration(root.key("lease", "heartbeat"), c.Lease.Heartbeat)
	case hb > 0 && hb < 50*time.Millisecond:
		v.at(root.key("lease", "heartbeat"), "must be at least 50ms; got %v", hb)
	case hb > 0 && c.Lease.TTL > 0 && 3*hb > c.Lease.TTL.D():
		v.at(root.key("lease", "heartbeat"), "must be at most a third of lease.ttl (%v), so a dead replica is noticed before its leases expire; got %v", c.Lease.TTL.D(), hb)
	}
	if c.NATS.AckWait > 0 && c.NATS.AckWait.D() < time.Second {
		v.at(root.key("nats", "ack_wait"), "must be at least 1s; got %v", c.NATS.AckWait.D())
	}
	// Ignored keys, accepted so that older files load (Warnings says so).
	if n := c.NATS.MaxConsumers; n < 0 {
		v.at(root.key("nats", "max_consumers"), "must not be negative; got %d", n)
	}
	if n := c.NATS.HandledIDs; n < 0 {
		v.at(root.key("nats", "handled_ids"), "must not be negative; got %d", n)
	}
	v.inputLimits(root.key("nats"), c.NATS)
	switch n := c.NATS.Replicas; {
	case !slices.Contains(natsReplicas, n):
		v.at(root.key("nats", "replicas"), "must be 1, 3 or 5 (an odd number of copies, so that a majority of them outlives a lost server); got %d", n)
	case n > 1 && c.NATS.URL == "":
		v.at(root.key("nats", "replicas"), "%d copies need a JetStream cluster of at least %d servers, but nats.url is empty and the embedded server is a single server that holds 1; set nats.url to the cluster or nats.replicas to 1", n, n)
	case n > 1 && c.NATS.JetStream != nil && !*c.NATS.JetStream:
		v.at(root.key("nats", "replicas"), "copies are kept by JetStream, but nats.jetstream is false; set nats.replicas to 1 or nats.jetstream to true")
	}

	v.events(c)
	v.memory(c)
	v.metrics(c)
	v.mcp(c)
	v.telemetry(c)

	scheme, _, ok := strings.Cut(c.Store.URL, "://")
	switch {
	case !ok:
		v.at(root.key("store", "url"), "want SCHEME://..., with scheme one of %s; got %q", strings.Join(storeSchemes, ", "), c.Store.URL)
	case !slices.Contains(storeSchemes, scheme):
		v.at(root.key("store", "url"), "scheme must be one of %s; got %q", strings.Join(storeSchemes, ", "), c.Store.URL)
	case scheme == "nats" && c.NATS.JetStream != nil && !*c.NATS.JetStream:
		v.at(root.key("store", "url"), "nats:// keeps state in JetStream KV, but nats.jetstream is false; use redis:// (or memory:// for tests)")
	}

	for i, t := range c.API.Tokens {
		p := root.key("api", "tokens").index(i)
		v.oneOf(p.key("role"), t.Role, tokenRoles)
		if (t.ValueEnv == "") == (t.ValueFile == "") {
			v.at(p, "needs exactly one of value_env, value_file")
		}
		for j, pat := range t.Agents {
			v.agentPattern(c, p.key("agents").index(j), pat)
		}
	}
	v.atLeastOne(root.key("api", "alertmanager_max_bytes"), c.API.AlertmanagerMaxBytes)
	v.inflight(root.key("api", "max_inflight_bytes"), c.API)
	apiOK := v.listen(root.key("api", "listen"), c.API.Listen, false)
	natsOK := c.NATS.URL != "" || v.listen(root.key("nats", "listen"), c.NATS.Listen, true)
	if apiOK && len(c.API.Tokens) == 0 && !IsLoopback(c.API.Listen) {
		v.at(root.key("api", "listen"), "%q is reachable beyond loopback and api.tokens is empty: anyone who can reach it could pause agents and add budget; add a token to api.tokens or listen on 127.0.0.1", c.API.Listen)
	}
	if natsOK && c.NATS.URL == "" && !c.NATS.EmbeddedOnLoopback() && !c.NATS.Authenticated() {
		v.at(root.key("nats", "listen"), "the embedded NATS server on %q is reachable beyond loopback without authentication: anyone who can reach it could publish to inboxes, pause agents and read the state store; set nats.token_env or nats.token_file (or nats.user with password_env/password_file, or nats.nkey_file), or listen on 127.0.0.1", c.NATS.Listen)
	}
	if c.NATS.User != "" && c.NATS.PasswordEnv != "" && c.NATS.PasswordFile != "" {
		v.at(root.key("nats", "password_file"), "set one of password_env, password_file")
	}
	if c.NATS.URL == "" && c.NATS.CredsFile != "" {
		v.at(root.key("nats", "creds_file"), "a creds file is for an external server (nats.url); the embedded server takes token_env/token_file, user with password_env/password_file, or nkey_file")
	}
	if c.NATS.TokenEnv != "" && c.NATS.TokenFile != "" {
		v.at(root.key("nats", "token_file"), "set one of token_env, token_file")
	}

	for _, name := range sortedKeys(c.Models) {
		v.model(c, name, c.Models[name])
	}
	for _, name := range sortedKeys(c.Pricing) {
		p, pr := root.key("pricing", name), c.Pricing[name]
		v.nonNegative(p.key("input_per_mtok"), pr.InputPerMTok)
		v.nonNegative(p.key("cached_input_per_mtok"), pr.CachedInputPerMTok)
		v.nonNegative(p.key("output_per_mtok"), pr.OutputPerMTok)
	}

	if len(c.Agents) == 0 {
		v.at(root.key("agents"), "at least one agent is required")
	}
	seen := map[string]int{}
	for i := range c.Agents {
		p := root.key("agents").index(i)
		a := &c.Agents[i]
		if first, dup := seen[a.Name]; dup && a.Name != "" {
			v.at(p.key("name"), "duplicate agent name %q (also agents[%d])", a.Name, first)
		} else {
			seen[a.Name] = i
		}
		v.agent(c, p, a)
	}
	v.sharedSubjects(c)
	v.webhooks(c)
}

// sharedSubjects checks the subscribe: subjects of different agents
// against each other: the input stream holds them all, and JetStream's
// subjects may not overlap, so where two overlap one must contain the
// other (alerts.> and alerts.prod.>: the stream holds alerts.>).
func (v *validator) sharedSubjects(c *Config) {
	type bound struct {
		agent, sub int
		subject    string
	}
	var all []bound
	for i, a := range c.Agents {
		for j, s := range a.Subscribe {
			if s.Subject == "" {
				continue
			}
			for _, o := range all {
				if o.agent != i && subject.Overlap(s.Subject, o.subject) && !subject.Covers(s.Subject, o.subject) && !subject.Covers(o.subject, s.Subject) {
					v.at(path{"agents"}.index(i).key("subscribe").index(j).key("subject"),
						"%q overlaps %q of agents[%d] (%s), but neither contains the other: the input stream cannot hold both; make one contain the other or make them disjoint",
						s.Subject, o.subject, o.agent, c.Agents[o.agent].Name)
				}
			}
			all = append(all, bound{i, j, s.Subject})
		}
	}
}

func (v *validator) model(c *Config, name string, m Model) {
	p := path{"models"}.key(name)
	v.oneOf(p.key("provider"), m.Provider, providers)
	v.modelSettings(c, name, m)
	if m.APIKeyEnv != "" && m.APIKeyFile != "" {
		v.at(p.key("api_key_file"), "api_key_env and api_key_file are mutually exclusive")
	}
	hasScript := len(m.Script) > 0 || m.ScriptFile != ""
	if m.Provider != "scripted" {
		if !slices.Contains(providers, m.Provider) {
			return
		}
		for _, k := range []struct {
			key string
			set bool
		}{{"script", len(m.Script) > 0}, {"script_file", m.ScriptFile != ""}, {"behaviour", m.Behaviour != ""}, {"loop", m.Loop}} {
			if k.set {
				v.at(p.key(k.key), "only for provider scripted, not %s", m.Provider)
			}
		}
		if m.Model == "" {
			v.at(p.key("model"), "required for provider %s (the provider's model name)", m.Provider)
		}
		if m.APIKeyEnv == "" && m.APIKeyFile == "" && !(m.Provider == "openai" && m.BaseURL != "") && !m.Vertex {
			v.at(p, "provider %s needs api_key_env or api_key_file (the key itself never goes in the config)", m.Provider)
		}
		if m.Vertex && (m.Provider != "gemini" || m.Project == "" || m.Location == "") {
			v.at(p.key("vertex"), "vertex needs provider gemini with project and location")
		}
		v.duration(p.key("timeout"), m.Timeout)
		if m.Retry.Max != nil && *m.Retry.Max < 0 {
			v.at(p.key("retry", "max"), "must not be negative; got %d", *m.Retry.Max)
		}
		if m.MaxTokens < 0 {
			v.at(p.key("max_tokens"), "must not be negative; got %d", m.MaxTokens)
		}
		return
	}

	switch {
	case !hasScript && m.Behaviour == "":
		v.at(p, "a scripted model needs one of script, script_file, behaviour")
	case hasScript && m.Behaviour != "":
		v.at(p, "a scripted model needs exactly one of script, script_file, behaviour")
	case m.Behaviour != "" && !slices.Contains(behaviours, m.Behaviour):
		v.at(p.key("behaviour"), "unknown behaviour %q (known: %s)", m.Behaviour, strings.Join(behaviours, ", "))
	}

	file := v.file
	if m.ScriptFile != "" {
		file = scriptPath(c.File, m.ScriptFile)
	}
	for i, s := range m.Script {
		sp := p.key("script").index(i)
		line := s.Line
		if line == 0 && file == v.file {
			line = v.line(sp)
		}
		var kinds []string
		for _, k := range []struct {
			name string
			set  bool
		}{{"text", s.Text != ""}, {"call", s.Call != nil}, {"error", s.Error != ""}, {"hang", s.Hang}} {
			if k.set {
				kinds = append(kinds, k.name)
			}
		}
		switch {
		case len(kinds) == 0:
			v.atLine(file, line, sp, "empty step: needs one of text, call, error, hang")
		case len(kinds) > 1 && !slices.Equal(kinds, []string{"text", "call"}):
			v.atLine(file, line, sp, "a step needs exactly one of text, call, error, hang (only text and call go together); got %s", strings.Join(kinds, " and "))
		}
		if s.Call != nil && s.Call.Name == "" {
			v.atLine(file, line, sp.key("call", "name"), "required")
		}
		if s.Delay < 0 {
			v.atLine(file, line, sp.key("delay"), "must not be negative; got %s", s.Delay.D())
		}
		for _, u := range []struct {
			key string
			n   int
		}{{"input", s.Usage.Input}, {"cached_input", s.Usage.CachedInput}, {"output", s.Usage.Output}} {
			if u.n < 0 {
				v.atLine(file, line, sp.key("usage", u.key), "must not be negative; got %d", u.n)
			}
		}
	}
}

func (v *validator) agent(c *Config, p path, a *Agent) {
	switch {
	case a.Name == "":
		v.at(p.key("name"), "required")
	case !namePattern.MatchString(a.Name):
		v.at(p.key("name"), "%q must match %s: agent names are NATS subject tokens", a.Name, namePattern)
	}

	switch _, ok := c.Models[a.Model]; {
	case a.Model == "":
		v.at(p.key("model"), "required: a key of models")
	case !ok && len(c.Models) == 0:
		v.at(p.key("model"), "unknown model %q: no models are defined", a.Model)
	case !ok:
		v.at(p.key("model"), "unknown model %q (models: %s)", a.Model, strings.Join(sortedKeys(c.Models), ", "))
	}

	if a.ReplicaAffinity != "" {
		if _, err := pathpkg.Match(a.ReplicaAffinity, ""); err != nil {
			v.at(p.key("replica_affinity"), "bad glob %q: %v", a.ReplicaAffinity, err)
		}
	}

	for i, t := range a.Tools {
		switch {
		case !slices.Contains(KnownTools, t):
			v.at(p.key("tools").index(i), "unknown tool %q (known: %s)", t, strings.Join(KnownTools, ", "))
		case slices.Index(a.Tools, t) < i:
			v.at(p.key("tools").index(i), "tool %q is listed twice", t)
		}
	}
	for i, s := range a.Publish {
		v.subject(p.key("publish").index(i), s)
		v.publishable(c, p.key("publish").index(i), s)
	}
	for i, u := range a.HTTPGet {
		// The tool's own normaliser: what validate accepts, run accepts.
		if _, err := urlprefix.ParsePrefixes([]string{u}); err != nil {
			v.at(p.key("http_get").index(i), "%v", err)
		}
	}
	if slices.Contains(a.Tools, "http_get") && len(a.HTTPGet) == 0 {
		v.at(p.key("tools"), "http_get needs http_get: the URL prefixes it may read")
	}
	for i, s := range a.Subscribe {
		sp := p.key("subscribe").index(i)
		v.subject(sp.key("subject"), s.Subject)
		v.oneOf(sp.key("mode"), s.Mode, subscribeModes)
		if pre := c.NATS.SubjectPrefix + "."; c.NATS.SubjectPrefix != "" && (strings.HasPrefix(s.Subject, pre) || s.Subject == ">") {
			v.at(sp.key("subject"), "%q is under nats.subject_prefix %q, whose subjects are routed by agent name; publish to %s%s.inbox or .deferred instead", s.Subject, c.NATS.SubjectPrefix, pre, a.Name)
		}
		for j, o := range a.Subscribe[:i] {
			if s.Subject != "" && o.Subject != "" && subject.Overlap(s.Subject, o.Subject) {
				v.at(sp.key("subject"), "%q overlaps subscribe[%d] %q: a message on both would reach the agent twice; make them disjoint", s.Subject, j, o.Subject)
			}
		}
	}

	names := map[string]int{}
	for i, s := range a.Schedules {
		v.schedule(p.key("schedules").index(i), s, names, i)
	}

	sp := p.key("sleep")
	v.duration(sp.key("min"), a.Sleep.Min)
	v.duration(sp.key("default"), a.Sleep.Default)
	v.duration(sp.key("max"), a.Sleep.Max)
	switch {
	case a.Sleep.Min > a.Sleep.Max:
		v.at(sp.key("min"), "min %s is above max %s", a.Sleep.Min, a.Sleep.Max)
	case a.Sleep.Default > 0 && a.Sleep.Default < a.Sleep.Min:
		v.at(sp.key("default"), "default %s is below min %s", a.Sleep.Default, a.Sleep.Min)
	case a.Sleep.Default > a.Sleep.Max:
		v.at(sp.key("default"), "default %s is above max %s", a.Sleep.Default, a.Sleep.Max)
	}

	bp := p.key("budgets")
	v.nonNegative(bp.key("turn_usd"), a.Budgets.TurnUSD)
	v.nonNegative(bp.key("session_usd"), a.Budgets.SessionUSD)
	v.nonNegative(bp.key("daily_usd"), a.Budgets.DailyUSD)

	v.oneOf(p.key("watchdog", "mode"), a.Watchdog.Mode, watchdogModes)
	v.atLeastOne(p.key("inbox", "cap"), a.Inbox.Cap)
	v.duration(p.key("turn", "timeout"), a.Turn.Timeout)
	v.duration(p.key("turn", "coalesce"), a.Turn.Coalesce)
	v.atLeastOne(p.key("turn", "max_per_wake"), a.Turn.MaxPerWake)
	if a.Turn.MaxInputBytes < 0 {
		v.at(p.key("turn", "max_input_bytes"), "must not be negative; got %d", a.Turn.MaxInputBytes)
	}
	v.duration(p.key("turn", "resume_within"), a.Turn.ResumeWithin)
	v.duration(p.key("turn", "retry", "base"), a.Turn.Retry.Base)
	v.duration(p.key("turn", "retry", "max"), a.Turn.Retry.Max)
	if a.Turn.Retry.Base > a.Turn.Retry.Max {
		v.at(p.key("turn", "retry", "base"), "base %s is above max %s", a.Turn.Retry.Base, a.Turn.Retry.Max)
	}

	if a.Subagents.Max < 0 || a.Subagents.Depth < 0 || a.Subagents.BudgetUSD < 0 {
		v.at(p.key("subagents"), "max, depth and budget_usd must not be negative")
	}
	v.duration(p.key("subagents", "timeout"), a.Subagents.Timeout)
	if a.Subagents.Model != "" {
		if _, ok := c.Models[a.Subagents.Model]; !ok {
			v.at(p.key("subagents", "model"), "unknown model %q", a.Subagents.Model)
		}
	}
	if slices.Contains(a.Tools, "spawn_subagent") && slices.Contains(a.Subagents.Tools, "spawn_subagent") {
		v.at(p.key("subagents", "tools"), "subagents cannot spawn subagents (depth 1)")
	}
	for _, f := range []struct {
		key string
		n   int
	}{
		{"repeat", a.Watchdog.Repeat}, {"cycle_repeats", a.Watchdog.CycleRepeats}, {"dominant", a.Watchdog.Dominant},
		{"window", a.Watchdog.Window}, {"failures", a.Watchdog.Failures}, {"turn_repeat", a.Watchdog.TurnRepeat},
	} {
		if f.n < 0 {
			v.at(p.key("watchdog", f.key), "must not be negative; got %d", f.n)
		}
	}
	if a.Watchdog.Dominant > a.Watchdog.Window {
		v.at(p.key("watchdog", "dominant"), "must not exceed watchdog.window (%d); got %d", a.Watchdog.Window, a.Watchdog.Dominant)
	}
	for _, f := range []struct {
		key string
		n   int
	}{
		{"model_calls_per_turn", a.Limits.ModelCallsPerTurn}, {"tool_calls_per_turn", a.Limits.ToolCallsPerTurn}, {"tokens_per_turn", a.Limits.TokensPerTurn},
		{"turns_per_hour", a.Limits.TurnsPerHour}, {"turn_burst", a.Limits.TurnBurst},
	} {
		if f.n < 0 {
			v.at(p.key("limits", f.key), "must not be negative; got %d", f.n)
		}
	}
	v.atLeastOne(p.key("turn", "history_turns"), a.Turn.HistoryTurns)
	if a.Turn.HistoryTurns > MaxHistoryTurns {
		v.at(p.key("turn", "history_turns"), "must be at most %d (the NATS KV store keeps %d revisions of a list); got %d", MaxHistoryTurns, MaxHistoryTurns, a.Turn.HistoryTurns)
	}
}

// MaxHistoryTurns bounds turn.history_turns.
const MaxHistoryTurns = 64

func (v *validator) subject(p path, s string) {
	switch {
	case s == "":
		v.at(p, "required: a NATS subject")
	case strings.ContainsAny(s, " \t\r\n"):
		v.at(p, "NATS subject %q contains whitespace", s)
	}
}

// schedule checks one schedule; names holds the agent's schedule names
// seen so far.
func (v *validator) schedule(p path, s Schedule, names map[string]int, i int) {
	switch first, dup := names[s.Name]; {
	case s.Name == "":
		v.at(p.key("name"), "required")
	case !namePattern.MatchString(s.Name):
		v.at(p.key("name"), "%q must match %s: schedule names are API path segments and metric labels", s.Name, namePattern)
	case dup:
		v.at(p.key("name"), "duplicate schedule name %q (also schedules[%d])", s.Name, first)
	default:
		names[s.Name] = i
	}

	if s.Cron == "" {
		v.at(p.key("cron"), "required")
	} else if _, err := cronParser.Parse(s.Cron); err != nil {
		v.at(p.key("cron"), "bad cron %q: %v", s.Cron, err)
	} else if err := checkCronSteps(s.Cron); err != nil {
		v.at(p.key("cron"), "bad cron %q: %v", s.Cron, err)
	}

	if _, err := time.LoadLocation(s.Timezone); err != nil {
		v.at(p.key("timezone"), "bad timezone %q: %v", s.Timezone, err)
	}
	v.oneOf(p.key("overlap"), s.Overlap, overlapPolicies)
	v.duration(p.key("jitter"), s.Jitter)
}

// checkCronSteps rejects specs robfig/cron accepts but that cannot be
// meant: "*/61" in the minute field silently fires once an hour, at :00,
// and "@every -1s" fires every second.
func checkCronSteps(spec string) error {
	fields := strings.Fields(spec)
	if len(fields) > 0 && (strings.HasPrefix(fields[0], "TZ=") || strings.HasPrefix(fields[0], "CRON_TZ=")) {
		fields = fields[1:]
	}
	if len(fields) == 2 && fields[0] == "@every" {
		// cron rounds a delay below one second up to one second.
		if d, err := time.ParseDuration(fields[1]); err == nil && d < time.Second {
			return fmt.Errorf("@every needs at least 1s; got %s", fields[1])
		}
	}
	if len(fields) == 0 || strings.HasPrefix(fields[0], "@") {
		return nil
	}
	type bound struct {
		name   string
		lo, hi int
	}
	bounds := []bound{{"minute", 0, 59}, {"hour", 0, 23}, {"day-of-month", 1, 31}, {"month", 1, 12}, {"day-of-week", 0, 6}}
	if len(fields) == 6 {
		bounds = append([]bound{{"second", 0, 59}}, bounds...)
	}
	for i, f := range fields[:min(len(fields), len(bounds))] {
		for part := range strings.SplitSeq(f, ",") {
			_, step, ok := strings.Cut(part, "/")
			if !ok {
				continue
			}
			n, err := strconv.Atoi(step)
			if b := bounds[i]; err == nil && n > b.hi-b.lo {
				return fmt.Errorf("%s field %q: step %d exceeds %d", b.name, f, n, b.hi-b.lo)
			}
		}
	}
	return nil
}

// agentPattern checks a token's agent scope entry: a glob (path.Match
// syntax) or a configured agent's name.
func (v *validator) agentPattern(c *Config, p path, pat string) {
	if _, err := pathpkg.Match(pat, ""); err != nil {
		v.at(p, "bad glob %q: %v", pat, err)
		return
	}
	for _, a := range c.Agents {
		if ok, _ := pathpkg.Match(pat, a.Name); ok {
			return
		}
	}
	v.at(p, "%q matches no configured agent", pat)
}

// IsLoopback reports whether a host:port listen address is reachable only
// from this machine: a loopback IP or "localhost". An empty host, 0.0.0.0
// or [::] listens everywhere.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	if i := strings.IndexByte(host, '%'); i >= 0 { // IPv6 zone
		host = host[:i]
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// listen checks a listen address: host:port with a port in 0..65535 (0:
// any free port), or "-1" where random is allowed. It reports whether
// the address is well formed.
func (v *validator) listen(p path, addr string, random bool) bool {
	if random && addr == "-1" {
		return true
	}
	want := "host:port (e.g. 127.0.0.1:8080)"
	if random {
		want += " or -1 for a random port"
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		v.at(p, "want %s; got %q", want, addr)
		return false
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		v.at(p, "bad port %q: want %s", port, want)
		return false
	}
	return true
}

// minInputMaxBytes is the floor of nats.max_bytes: a smaller input stream
// holds too little to be meant.
const minInputMaxBytes = 1 << 20

// inputLimits checks the input stream's bounds under p (nats): each
// count or size -1 (no limit) or a real bound, and a size that holds at
// least one message of max_message_bytes.
func (v *validator) inputLimits(p path, n NATS) {
	if m := n.MaxMsgsPerSubject; m != -1 && m < 1 {
		v.at(p.key("max_msgs_per_subject"), "must be -1 (no limit) or at least 1; got %d", m)
	}
	switch b := n.MaxBytes; {
	case b == -1:
	case b < minInputMaxBytes:
		v.at(p.key("max_bytes"), "must be -1 (no limit) or at least %d (1 MiB); got %d", minInputMaxBytes, b)
	case b < int64(n.MaxMessageBytes):
		v.at(p.key("max_bytes"), "must be at least nats.max_message_bytes (%d), or a message that large could never be stored; got %d", n.MaxMessageBytes, b)
	}
	if r := n.ReadAheadBytes; r < -1 || (r > 0 && r < int64(n.MaxMessageBytes)) {
		v.at(p.key("read_ahead_bytes"), "must be -1 (keep none), 0 (the default, 32 MiB) or at least nats.max_message_bytes (%d); got %d", n.MaxMessageBytes, r)
	}
	switch d := n.MaxAge.D(); {
	case d < 0:
		v.duration(p.key("max_age"), n.MaxAge)
	case d > 0 && d < time.Minute:
		v.at(p.key("max_age"), "must be 0 (no maximum age) or at least 1m; got %v", d)
	}
}

// inflight checks api.max_inflight_bytes against the body limits: below
// the largest, a request the limits allow could never be admitted.
func (v *validator) inflight(p path, a API) {
	switch {
	case a.MaxInflightBytes < 1:
		v.atLeastOne(p, a.MaxInflightBytes)
	case a.MaxInflightBytes < a.AlertmanagerMaxBytes:
		v.at(p, "must be at least api.alertmanager_max_bytes (%d), or no Alertmanager notification that large could ever be admitted; got %d", a.AlertmanagerMaxBytes, a.MaxInflightBytes)
	case a.MaxInflightBytes < MaxAPIBodyBytes:
		v.at(p, "must be at least %d, the body limit of the other API routes, or no request that large could ever be admitted; got %d", MaxAPIBodyBytes, a.MaxInflightBytes)
	}
}
