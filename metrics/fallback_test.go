package metrics_test

import (
	"testing"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/metrics"
	"github.com/agent-worker/agent-worker/models"
)

// An agent whose model falls back to a cheaper one, which falls back to an
// unpriced one: each model's usage lands under its own model label and
// priced label, each hop is counted, and names outside the config are
// not label values.
func TestFallbacksHaveTheirOwnSeries(t *testing.T) {
	t.Parallel()
	m := metrics.New([]metrics.AgentInfo{{Name: "oncall", Model: "gpt-4.1", Priced: true,
		Fallbacks: []metrics.FallbackInfo{{Model: "gpt-4.1-nano", Priced: true}, {Model: "llama3.1:8b"}}}}, nil)
	before := series(t, m.Registry())
	expect(t, before, map[string]float64{
		`agent_worker_model_fallbacks_total{agent="oncall",fallback="gpt-4.1-nano",model="gpt-4.1"}`:     0,
		`agent_worker_model_fallbacks_total{agent="oncall",fallback="llama3.1:8b",model="gpt-4.1-nano"}`: 0,
		`agent_worker_model_requests_total{agent="oncall",model="gpt-4.1-nano",outcome="ok"}`:            0,
		`agent_worker_model_tokens_total{agent="oncall",model="llama3.1:8b",type="input"}`:               0,
		`agent_worker_model_cost_usd_total{agent="oncall",model="gpt-4.1-nano",priced="true"}`:           0,
		`agent_worker_model_cost_usd_total{agent="oncall",model="llama3.1:8b",priced="false"}`:           0,
	})

	ev := func(typ string, data map[string]any) events.Event {
		return events.Event{Time: t0, Agent: "oncall", Type: typ, Data: data}
	}
	observe(t, m,
		ev(models.EventRetry, map[string]any{"outcome": "retry", "model": "gpt-4.1"}),
		ev(models.EventFallback, map[string]any{"model": "gpt-4.1", "fallback": "gpt-4.1-nano", "error": "openai: 503"}),
		ev(guard.EventCharged, map[string]any{"model": "gpt-4.1-nano", "input_tokens": 1000, "output_tokens": 100, "cost_usd": 0.00014, "priced": true}),
		ev(models.EventRetry, map[string]any{"outcome": "rate_limited", "model": "gpt-4.1-nano"}),
		ev(models.EventFallback, map[string]any{"model": "gpt-4.1-nano", "fallback": "llama3.1:8b"}),
		ev(guard.EventCharged, map[string]any{"model": "llama3.1:8b", "input_tokens": 7, "cost_usd": 0.0, "priced": false}),
		ev(guard.EventCharged, map[string]any{"model": "gpt-4.1", "input_tokens": 5, "cost_usd": 0.5, "priced": true}),
		// Names the config does not know: the agent's model, or not counted.
		ev(guard.EventCharged, map[string]any{"model": "made-up", "input_tokens": 1, "cost_usd": 0.25}),
		ev(models.EventFallback, map[string]any{"model": "gpt-4.1", "fallback": "made-up"}),
	)
	got := series(t, m.Registry())
	want := map[string]float64{
		`agent_worker_model_fallbacks_total{agent="oncall",fallback="gpt-4.1-nano",model="gpt-4.1"}`:     1,
		`agent_worker_model_fallbacks_total{agent="oncall",fallback="llama3.1:8b",model="gpt-4.1-nano"}`: 1,
		`agent_worker_model_requests_total{agent="oncall",model="gpt-4.1",outcome="retry"}`:              1,
		`agent_worker_model_requests_total{agent="oncall",model="gpt-4.1",outcome="ok"}`:                 2,
		`agent_worker_model_requests_total{agent="oncall",model="gpt-4.1-nano",outcome="ok"}`:            1,
		`agent_worker_model_requests_total{agent="oncall",model="gpt-4.1-nano",outcome="rate_limited"}`:  1,
		`agent_worker_model_requests_total{agent="oncall",model="llama3.1:8b",outcome="ok"}`:             1,
		`agent_worker_model_tokens_total{agent="oncall",model="gpt-4.1",type="input"}`:                   6,
		`agent_worker_model_tokens_total{agent="oncall",model="gpt-4.1-nano",type="input"}`:              1000,
		`agent_worker_model_tokens_total{agent="oncall",model="gpt-4.1-nano",type="output"}`:             100,
		`agent_worker_model_tokens_total{agent="oncall",model="llama3.1:8b",type="input"}`:               7,
		`agent_worker_model_cost_usd_total{agent="oncall",model="gpt-4.1",priced="true"}`:                0.75,
		`agent_worker_model_cost_usd_total{agent="oncall",model="gpt-4.1-nano",priced="true"}`:           0.00014,
		`agent_worker_events_dropped_total{reason="unconfigured"}`:                                       1,
	}
	expect(t, got, want)
	for k, v := range got {
		if _, ok := want[k]; !ok && v != 0 {
			t.Errorf("%s = %g: counted where it does not belong", k, v)
		}
	}
}
