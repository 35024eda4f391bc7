package config

import "testing"

func TestMetricsPerAgent(t *testing.T) {
	t.Parallel()
	c, errs := loadText(t, `
models:
  main: {provider: scripted, behaviour: demo}
agents:
  - {name: a, model: main}
`)
	assertErrors(t, errs, nil)
	if c.Metrics.PerAgent != "auto" {
		t.Errorf("metrics.per_agent defaults to %q, want auto", c.Metrics.PerAgent)
	}
	for _, mode := range []string{"full", "lazy", "auto"} {
		c, errs := loadText(t, `
metrics: {per_agent: `+mode+`}
models:
  main: {provider: scripted, behaviour: demo}
agents:
  - {name: a, model: main}
`)
		assertErrors(t, errs, nil)
		if c.Metrics.PerAgent != mode {
			t.Errorf("metrics.per_agent %q loaded as %q", mode, c.Metrics.PerAgent)
		}
	}
	_, errs = loadText(t, `
models:
  main: {provider: scripted, behaviour: demo}
metrics:
  per_agent: summary
agents:
  - {name: a, model: main}
`)
	assertErrors(t, errs, []string{`config.yaml:4: metrics.per_agent: must be one of auto, full, lazy; got "summary"`})
}
