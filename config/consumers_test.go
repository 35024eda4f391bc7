package config

import (
	"slices"
	"testing"
)

// nats.max_consumers: 0 sizes the input stream's consumer limit from the
// agents (twice 2 × agents + 1, at least nats-server's default 1,000); a
// value that cannot hold the agents' consumers, or a negative one, fails
// with its line and the numbers.
func TestNATSMaxConsumers(t *testing.T) {
	t.Parallel()
	const agents = `
models: {m: {provider: scripted, script: [{text: ok}]}}
agents: [{name: a, model: m}, {name: b, model: m}, {name: c, model: m}]
`
	for _, c := range []struct {
		nats  string
		limit int
		errs  []string
	}{
		{"nats: {}", 1000, nil},
		{"nats: {max_consumers: 7}", 7, nil},
		{"nats: {max_consumers: 5000}", 5000, nil},
		{"nats:\n  max_consumers: 6", 0,
			[]string{"config.yaml:2: nats.max_consumers: 6 consumers cannot hold 3 agents: each has two (wake and deferred input) and one more reads input for unknown agents, 7 in all; set at least 7, or 0 to size it from the agents (1000)"}},
		{"nats:\n  max_consumers: -1", 0,
			[]string{"config.yaml:2: nats.max_consumers: must not be negative (0 sets it from the number of agents); got -1"}},
	} {
		cfg, errs := loadText(t, "\n"+c.nats+agents)
		if !slices.Equal(errs, c.errs) {
			t.Errorf("%q: errors\n  %q\nwant\n  %q", c.nats, errs, c.errs)
			continue
		}
		if c.errs == nil {
			if got := cfg.NATS.ConsumerLimit(len(cfg.Agents)); got != c.limit {
				t.Errorf("%q: limit %d, want %d", c.nats, got, c.limit)
			}
		}
	}
	if got, want := (NATS{}).ConsumerLimit(1200), 2*ConsumersNeeded(1200); got != want || want != 4802 {
		t.Errorf("automatic limit for 1,200 agents: %d, want %d (4802)", got, want)
	}
}

// nats.handled_ids bounds each agent's handled-id record; out of range it
// fails with its line.
func TestNATSHandledIDs(t *testing.T) {
	t.Parallel()
	const agents = "\nmodels: {m: {provider: scripted, script: [{text: ok}]}}\nagents: [{name: a, model: m}]\n"
	for _, c := range []struct {
		nats string
		errs []string
	}{
		{"nats: {handled_ids: 5000}", nil},
		{"nats:\n  handled_ids: -1", []string{"config.yaml:2: nats.handled_ids: must be between 0 (the default, 1000) and 20000; got -1"}},
		{"nats:\n  handled_ids: 50000", []string{"config.yaml:2: nats.handled_ids: must be between 0 (the default, 1000) and 20000; got 50000"}},
	} {
		if _, errs := loadText(t, "\n"+c.nats+agents); !slices.Equal(errs, c.errs) {
			t.Errorf("%q: errors\n  %q\nwant\n  %q", c.nats, errs, c.errs)
		}
	}
}
