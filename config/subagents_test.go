package config

import (
	"slices"
	"testing"
)

// subagents.max_per_replica defaults to 8, may be 0 (this replica runs
// none), and must not be negative.
func TestSubagentsMaxPerReplica(t *testing.T) {
	t.Parallel()
	const agents = `
models: {m: {provider: scripted, script: [{text: ok}]}}
agents: [{name: a, model: m}]
`
	for _, c := range []struct {
		top  string
		want int
		errs []string
	}{
		{"", 8, nil},
		{"subagents: {max_per_replica: 0}", 0, nil},
		{"subagents: {max_per_replica: 3}", 3, nil},
		{"subagents: {max_per_replica: -1}", 0, []string{"config.yaml:1: subagents.max_per_replica: must not be negative; got -1"}},
	} {
		cfg, errs := loadText(t, "\n"+c.top+agents)
		if !slices.Equal(errs, c.errs) {
			t.Errorf("%q: errors %q, want %q", c.top, errs, c.errs)
			continue
		}
		if c.errs == nil && (cfg.Subagents.MaxPerReplica == nil || *cfg.Subagents.MaxPerReplica != c.want) {
			t.Errorf("%q: max_per_replica %v, want %d", c.top, cfg.Subagents.MaxPerReplica, c.want)
		}
	}
}
