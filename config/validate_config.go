package config

import (
	"slices"
	"strings"
	"time"
)

// config checks the whole file, section by section, in the order its
// problems are reported.
func (v *validator) config(c *Config) {
	v.topLevel(c)
	v.natsRetention(c.NATS)
	v.lease(c.Lease)
	v.natsStream(c.NATS)

	v.events(c)
	v.memory(c)
	v.metrics(c)
	v.mcp(c)
	v.telemetry(c)

	v.store(c)
	v.seal(c)
	v.apiTokens(c)
	v.listeners(c)
	v.natsAuth(c.NATS)

	for _, name := range sortedKeys(c.Models) {
		v.model(c, name, c.Models[name])
	}
	v.pricing(c)
	v.agents(c)
	v.sharedSubjects(c)
	v.webhooks(c)
}

// topLevel checks the scalar settings of the file's top level: shutdown,
// log, the message size, guardrails and the replica's subagents.
func (v *validator) topLevel(c *Config) {
	var root path
	v.duration(root.key("shutdown_grace"), c.ShutdownGrace)
	v.oneOf(root.key("log", "format"), c.Log.Format, logFormats)
	v.oneOf(root.key("log", "level"), c.Log.Level, logLevels)

	v.atLeastOne(root.key("nats", "max_message_bytes"), c.NATS.MaxMessageBytes)
	if _, err := time.LoadLocation(c.Guardrails.Timezone); err != nil {
		v.at(root.key("guardrails", "timezone"), "unknown time zone %q", c.Guardrails.Timezone)
	}
	v.nonNegative(root.key("guardrails", "worker_daily_usd"), c.Guardrails.WorkerDailyUSD)
	if n := c.Subagents.MaxPerReplica; n != nil && *n < 0 {
		v.at(root.key("subagents", "max_per_replica"), "must not be negative; got %d", *n)
	}
}

// lease checks lease.ttl and lease.heartbeat against each other.
func (v *validator) lease(l Lease) {
	var root path
	if l.TTL > 0 && l.TTL.D() < 3*time.Second {
		v.at(root.key("lease", "ttl"), "must be at least 3s; got %v", l.TTL.D())
	}
	switch hb := l.Heartbeat.D(); {
	case hb < 0:
		v.duration(root.key("lease", "heartbeat"), l.Heartbeat)
	case hb > 0 && hb < 50*time.Millisecond:
		v.at(root.key("lease", "heartbeat"), "must be at least 50ms; got %v", hb)
	case hb > 0 && l.TTL > 0 && 3*hb > l.TTL.D():
		v.at(root.key("lease", "heartbeat"), "must be at most a third of lease.ttl (%v), so a dead replica is noticed before its leases expire; got %v", l.TTL.D(), hb)
	}
}

// store checks store.url's scheme.
func (v *validator) store(c *Config) {
	var root path
	scheme, _, ok := strings.Cut(c.Store.URL, "://")
	switch {
	case !ok:
		v.at(root.key("store", "url"), "want SCHEME://..., with scheme one of %s; got %q", strings.Join(storeSchemes, ", "), c.Store.URL)
	case !slices.Contains(storeSchemes, scheme):
		v.at(root.key("store", "url"), "scheme must be one of %s; got %q", strings.Join(storeSchemes, ", "), c.Store.URL)
	case scheme == "nats" && c.NATS.JetStream != nil && !*c.NATS.JetStream:
		v.at(root.key("store", "url"), "nats:// keeps state in JetStream KV, but nats.jetstream is false; use redis:// (or memory:// for tests)")
	}
}
