package config

import (
	"slices"
	"testing"
)

// nats.max_consumers and nats.handled_ids are ignored but still load, so
// older files keep working: any value that is not negative passes (a
// max_consumers far below 2 × agents + 1, a handled_ids above the old
// 20,000), a negative one fails with its line.
func TestIgnoredNATSKeysStillLoad(t *testing.T) {
	t.Parallel()
	const agents = `
models: {m: {provider: scripted, script: [{text: ok}]}}
agents: [{name: a, model: m}, {name: b, model: m}, {name: c, model: m}]
`
	for _, c := range []struct {
		nats string
		errs []string
	}{
		{"nats: {max_consumers: 1}", nil},
		{"nats: {max_consumers: 5000}", nil},
		{"nats: {handled_ids: 50000}", nil},
		{"nats:\n  max_consumers: -1", []string{"config.yaml:2: nats.max_consumers: must not be negative; got -1"}},
		{"nats:\n  handled_ids: -1", []string{"config.yaml:2: nats.handled_ids: must not be negative; got -1"}},
	} {
		if _, errs := loadText(t, "\n"+c.nats+agents); !slices.Equal(errs, c.errs) {
			t.Errorf("%q: errors\n  %q\nwant\n  %q", c.nats, errs, c.errs)
		}
	}
}
