package metrics_test

import (
	"strings"
	"testing"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/metrics"
)

// An agent an operator switched to another configured model: that model's
// responses and failures are counted under its own model and priced
// labels; its series appear with its first event, not before; names
// outside the config are the agent's model.
func TestASwitchedModelHasItsOwnSeries(t *testing.T) {
	t.Parallel()
	m := metrics.New([]metrics.AgentInfo{{Name: "oncall", Model: "gpt-4.1", Priced: true,
		Alternates: []metrics.FallbackInfo{{Model: "gpt-4.1", Priced: true}, {Model: "o4-mini", Priced: true}, {Model: "llama3.1:8b"}}}}, nil)
	for k := range series(t, m.Registry()) {
		if strings.Contains(k, `model="o4-mini"`) || strings.Contains(k, `model="llama3.1:8b"`) {
			t.Errorf("%s exists before the agent was switched to its model", k)
		}
	}
	ev := func(typ string, data map[string]any) events.Event {
		return events.Event{Time: t0, Agent: "oncall", Type: typ, Data: data}
	}
	observe(t, m,
		ev(guard.EventCharged, map[string]any{"model": "o4-mini", "input_tokens": 1000, "output_tokens": 100, "cost_usd": 0.0015, "priced": true}),
		ev(guard.EventModelError, map[string]any{"model": "o4-mini", "error": "openai: 400"}),
		ev(guard.EventCharged, map[string]any{"model": "llama3.1:8b", "input_tokens": 7, "cost_usd": 0.0, "priced": false}),
		ev(guard.EventModelError, map[string]any{"model": "made-up", "error": "openai: 400"}),
	)
	expect(t, series(t, m.Registry()), map[string]float64{
		`agent_worker_model_requests_total{agent="oncall",model="o4-mini",outcome="ok"}`:     1,
		`agent_worker_model_requests_total{agent="oncall",model="o4-mini",outcome="error"}`:  1,
		`agent_worker_model_tokens_total{agent="oncall",model="o4-mini",type="input"}`:       1000,
		`agent_worker_model_cost_usd_total{agent="oncall",model="o4-mini",priced="true"}`:    0.0015,
		`agent_worker_model_requests_total{agent="oncall",model="llama3.1:8b",outcome="ok"}`: 1,
		`agent_worker_model_requests_total{agent="oncall",model="gpt-4.1",outcome="error"}`:  1,
	})
}
