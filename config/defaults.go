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

	setString(&c.NATS.Listen, "127.0.0.1:4222")
	setString(&c.NATS.SubjectPrefix, subject.DefaultPrefix)
	setString(&c.NATS.Stream, "AGENTS")
	setInt(&c.NATS.MaxMessageBytes, 65536)
	setBool(&c.NATS.JetStream, true)
	setDuration(&c.NATS.DuplicateWindow, 2*time.Minute)
	setDuration(&c.NATS.AckWait, 10*time.Second)
	setDuration(&c.NATS.DLQMaxAge, 7*24*time.Hour)
	setInt64(&c.NATS.DLQMaxBytes, 256<<20)
	setInt(&c.NATS.MaxMsgsPerSubject, defaultMaxMsgsPerSubject)
	setInt64(&c.NATS.MaxBytes, defaultInputMaxBytes)
	setInt(&c.NATS.Replicas, 1)
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

	for i := range c.Agents {
		a := &c.Agents[i]
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
	applyMemoryDefaults(c)
	setString(&c.Metrics.PerAgent, "auto")
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
