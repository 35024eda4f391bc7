package config

import (
	"time"

	"github.com/agent-worker/agent-worker/natsbus/subject"
)

// The input stream's bounds (nats.max_msgs_per_subject, nats.max_bytes),
// also NATS.InputLimits's answer for a zero field.
const (
	defaultMaxMsgsPerSubject = 100_000
	defaultInputMaxBytes     = 1 << 30
)

// applyDefaults fills every unset (zero) field that has a default. It is the
// only place defaults are decided; the field comments in config.go state
// them. A field explicitly set to its zero value (inbox.cap: 0, sleep.max:
// 0) is indistinguishable from an unset one and gets the default too.
// Negative values are left for validation to reject.
func applyDefaults(c *Config) {
	for name, m := range c.MCPServers {
		setDuration(&m.Timeout, MCPDefaultTimeout)
		setInt(&m.MaxResultBytes, MCPDefaultMaxResultBytes)
		c.MCPServers[name] = m
	}
	setString(&c.DataDir, "./data")
	setDuration(&c.ShutdownGrace, 30*time.Second)

	setString(&c.Log.Format, "text")
	setString(&c.Guardrails.Timezone, "UTC")
	setDuration(&c.Lease.TTL, 15*time.Second)
	setDuration(&c.Lease.Heartbeat, time.Second)
	setString(&c.Log.Level, "info")

	applyNATSDefaults(&c.NATS)
	applyEventsDefaults(&c.Events)
	applyWebhookDefaults(c)

	if c.Subagents.MaxPerReplica == nil {
		eight := 8
		c.Subagents.MaxPerReplica = &eight
	}

	setString(&c.Store.URL, "nats://")
	setString(&c.API.Listen, "127.0.0.1:8080")
	setInt(&c.API.AlertmanagerMaxBytes, 4<<20)
	setInt(&c.API.MaxInflightBytes, 16<<20)

	applyModelDefaults(c)

	for i := range c.Agents {
		applyAgentDefaults(&c.Agents[i])
	}
	applyMemoryDefaults(c)
	setString(&c.Metrics.PerAgent, "auto")
}

// applyNATSDefaults fills the unset fields of nats.
func applyNATSDefaults(n *NATS) {
	setString(&n.Listen, "127.0.0.1:4222")
	setString(&n.SubjectPrefix, subject.DefaultPrefix)
	setString(&n.Stream, "AGENTS")
	setInt(&n.MaxMessageBytes, 65536)
	setBool(&n.JetStream, true)
	setDuration(&n.DuplicateWindow, 2*time.Minute)
	setDuration(&n.AckWait, 10*time.Second)
	setDuration(&n.DLQMaxAge, 7*24*time.Hour)
	setInt64(&n.DLQMaxBytes, 256<<20)
	setInt(&n.MaxMsgsPerSubject, defaultMaxMsgsPerSubject)
	setInt64(&n.MaxBytes, defaultInputMaxBytes)
	setInt(&n.Replicas, 1)
}

// applyModelDefaults fills the unset fields of each model: a scripted
// model's name, a provider model's timeout, retries and max_tokens.
func applyModelDefaults(c *Config) {
	for name, m := range c.Models {
		// A scripted model has no provider-side name; its key stands in, so
		// pricing and metrics have something to look up.
		if m.Provider == "scripted" && m.Model == "" {
			m.Model = name
		}
		if m.Provider != "scripted" {
			setDuration(&m.Timeout, 120*time.Second)
			if m.Retry.Max == nil {
				three := 3
				m.Retry.Max = &three
			}
			setDuration(&m.Retry.Base, 500*time.Millisecond)
			setDuration(&m.Retry.MaxWait, 30*time.Second)
			setInt(&m.MaxTokens, 4096)
		}
		c.Models[name] = m
	}
}

// applyAgentDefaults fills the unset fields of one agent, its
// subscriptions and its schedules.
func applyAgentDefaults(a *Agent) {
	setDuration(&a.Sleep.Max, 24*time.Hour)
	if a.Sleep.Min == 0 {
		floor := Duration(10 * time.Second)
		if a.Sleep.Default > 0 {
			floor = min(floor, a.Sleep.Default)
		}
		a.Sleep.Min = max(min(floor, a.Sleep.Max), 0)
	}
	setString(&a.Watchdog.Mode, "enforce")
	setInt(&a.Watchdog.Repeat, 5)
	setInt(&a.Watchdog.CycleRepeats, 3)
	setInt(&a.Watchdog.Dominant, 8)
	setInt(&a.Watchdog.Window, 12)
	setInt(&a.Watchdog.Failures, 3)
	setInt(&a.Watchdog.TurnRepeat, 5)
	setInt(&a.Subagents.Max, 3)
	setInt(&a.Subagents.Depth, 1)
	setDuration(&a.Subagents.Timeout, 10*time.Minute)
	setInt(&a.Limits.ModelCallsPerTurn, 50)
	setInt(&a.Limits.ToolCallsPerTurn, 100)
	setInt(&a.Limits.TokensPerTurn, 500000)
	setInt(&a.Limits.TurnsPerHour, 360)
	setInt(&a.Limits.TurnBurst, 20)
	setInt(&a.Inbox.Cap, 256)
	setDuration(&a.Turn.Timeout, 10*time.Minute)
	setInt(&a.Turn.MaxPerWake, 10)
	setInt(&a.Turn.HistoryTurns, 10)
	setDuration(&a.Turn.Retry.Base, 2*time.Second)
	setDuration(&a.Turn.Retry.Max, 5*time.Minute)
	setInt(&a.Turn.MaxInputBytes, 256<<10)
	setDuration(&a.Turn.ResumeWithin, time.Hour)
	setDuration(&a.ApprovalTTL, time.Hour)
	for j := range a.Subscribe {
		setString(&a.Subscribe[j].Mode, "inbox")
	}
	for j := range a.Schedules {
		s := &a.Schedules[j]
		setString(&s.Timezone, "UTC")
		setString(&s.Overlap, "skip")
		setBool(&s.Enabled, true)
	}
}

func setString(p *string, def string) {
	if *p == "" {
		*p = def
	}
}

func setInt(p *int, def int) {
	if *p == 0 {
		*p = def
	}
}

func setInt64(p *int64, def int64) {
	if *p == 0 {
		*p = def
	}
}

func setDuration(p *Duration, def time.Duration) {
	if *p == 0 {
		*p = Duration(def)
	}
}

func setBool(p **bool, def bool) {
	if *p == nil {
		*p = &def
	}
}
