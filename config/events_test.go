package config

import (
	"slices"
	"testing"
	"time"
)

// events.max_age and events.max_bytes default to 7 days and 256 MiB, take
// what is written, and refuse too little with the line of the key; a bound
// subject that overlaps the event subjects (which the events stream
// holds) is refused with its line too, unless JetStream is off.
func TestEventsRetention(t *testing.T) {
	t.Parallel()
	const agents = `
models: {m: {provider: scripted, script: [{text: ok}]}}
agents:
  - name: a
    model: m
`
	for _, c := range []struct {
		yaml     string
		maxAge   time.Duration
		maxBytes int64
		errs     []string
	}{
		{"events: {}", 7 * 24 * time.Hour, 256 << 20, nil},
		{"data_dir: ./data", 7 * 24 * time.Hour, 256 << 20, nil},
		{"events: {max_age: 24h, max_bytes: 1073741824}", 24 * time.Hour, 1 << 30, nil},
		{"events: {max_age: 1m, max_bytes: 1048576}", time.Minute, 1 << 20, nil},
		{"events:\n  max_age: 30s\n  max_bytes: 1048575", 0, 0, []string{
			"config.yaml:2: events.max_age: must be at least 1m0s (a client must be able to resume a stream a moment later); got 30s",
			"config.yaml:3: events.max_bytes: must be at least 1048576 (1 MiB); got 1048575",
		}},
		{"events:\n  max_bytes: -5", 0, 0, []string{
			"config.yaml:2: events.max_bytes: must be at least 1048576 (1 MiB); got -5",
		}},
		{"events:\n  max_age: -1h", 0, 0, []string{
			`config.yaml:2: events.max_age: negative duration "-1h"`,
		}},
		{"events:\n  max_age: 7d", 0, 0, []string{
			`config.yaml:2: events.max_age: bad duration "7d": want a number and a unit, like 30s, 5m or 1h30m`,
		}},
	} {
		cfg, errs := loadText(t, "\n"+c.yaml+agents)
		if !slices.Equal(errs, c.errs) {
			t.Errorf("%q: errors\n  %q\nwant\n  %q", c.yaml, errs, c.errs)
			continue
		}
		if c.errs == nil && (cfg.Events.MaxAge.D() != c.maxAge || cfg.Events.MaxBytes != c.maxBytes) {
			t.Errorf("%q: max_age %v max_bytes %d, want %v %d", c.yaml, cfg.Events.MaxAge.D(), cfg.Events.MaxBytes, c.maxAge, c.maxBytes)
		}
	}
}

func TestBoundSubjectMustNotOverlapTheEventSubjects(t *testing.T) {
	t.Parallel()
	const doc = `
models: {m: {provider: scripted, script: [{text: ok}]}}
agents:
  - name: a
    model: m
    subscribe:
      - subject: "alerts.prod"
      - subject: "*.a.events.turn-completed"
`
	_, errs := loadText(t, doc)
	assertErrors(t, errs, []string{
		`config.yaml:7: agents[0].subscribe[1].subject: "*.a.events.turn-completed" overlaps the event subjects agents.*.events.>, which the events stream holds; make it disjoint`,
	})
	// Without JetStream there is no events stream to collide with.
	_, errs = loadText(t, "store: {url: \"memory://\"}\nnats: {jetstream: false}\n"+doc)
	assertErrors(t, errs, nil)
}
