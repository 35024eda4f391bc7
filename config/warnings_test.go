package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// warningLines are c's warnings as validate prints them, the file's
// directory left out.
func warningLines(c *Config) []string {
	var out []string
	for _, w := range c.Warnings() {
		w.File = "config.yaml"
		out = append(out, w.String())
	}
	return out
}

// A deprecated key is warned about, on its own line, only when the file
// writes it: the default that fills nats.ack_wait (10s) is not a reason.
// nats.max_age is warned about whenever it is set.
func TestWarnings(t *testing.T) {
	t.Parallel()
	const (
		ackWait      = "nats.ack_wait: warning: agents' input no longer has an ack deadline: a new owner reads on from the agent's cursor as soon as it holds the lease (lease.ttl); nats.ack_wait now only bounds how soon a crashed replica's subagent jobs are redelivered"
		maxConsumers = "nats.max_consumers: warning: agents no longer hold consumers on nats.stream (one router per replica reads the stream); the key is ignored"
		handledIDs   = "nats.handled_ids: warning: handled messages are no longer recorded by id: a message is handled when it is at or below its agent's cursor; the key is ignored"
		maxAge       = "nats.max_age: warning: a message older than 24h0m0s is removed from nats.stream unhandled: an agent that is paused, halted or without an owner for that long loses its input; 0 keeps every message until it is handled"
	)
	for _, c := range []struct {
		nats string
		want []string
	}{
		{"nats: {}", nil},
		{"nats:\n  stream: AGENTS\n  max_msgs_per_subject: -1\n  max_bytes: -1", nil},
		{"nats:\n  stream: AGENTS\n  ack_wait: 10s", []string{"config.yaml:3: " + ackWait}},
		{"nats:\n  max_consumers: 0", []string{"config.yaml:2: " + maxConsumers}},
		{"nats: {handled_ids: 1000}", []string{"config.yaml:1: " + handledIDs}},
		{"nats:\n  max_age: 24h", []string{"config.yaml:2: " + maxAge}},
		// In file order, whatever order the keys are checked in.
		{"nats:\n  max_age: 24h\n  handled_ids: 5\n  max_consumers: 9\n  ack_wait: 30s",
			[]string{"config.yaml:2: " + maxAge, "config.yaml:3: " + handledIDs, "config.yaml:4: " + maxConsumers, "config.yaml:5: " + ackWait}},
	} {
		cfg, errs := loadText(t, "\n"+c.nats+oneAgent)
		if errs != nil {
			t.Errorf("%q: %q", c.nats, errs)
			continue
		}
		if got := warningLines(cfg); !slices.Equal(got, c.want) {
			t.Errorf("%q: warnings\n  %s\nwant\n  %s", c.nats, strings.Join(got, "\n  "), strings.Join(c.want, "\n  "))
		}
	}
}

// The embedded default writes no deprecated key, and a Config built in
// code has no file to place a warning in: just the path.
func TestWarningsWithoutAFile(t *testing.T) {
	t.Parallel()
	c := Default()
	if w := c.Warnings(); len(w) != 0 {
		t.Errorf("Default().Warnings() = %v, want none", w)
	}
	c.NATS.MaxAge = Duration(90 * time.Minute)
	w := c.Warnings()
	if len(w) != 1 || w[0].File != "" || w[0].Line != 0 || !strings.HasPrefix(w[0].String(), "nats.max_age: warning: a message older than 1h30m0s ") {
		t.Errorf("warnings = %v", w)
	}
}
