package metrics_test

import (
	"testing"

	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/metrics"
)

// Asks are counted per agent and outcome, every outcome at 0 from the
// first scrape; an outcome the set does not know is "other".
func TestAskMetrics(t *testing.T) {
	t.Parallel()
	m := metrics.New(testAgents(), &source{})
	ev := func(outcome string) events.Event {
		return events.Event{Time: t0, Agent: "oncall", Type: events.Asked, Data: map[string]any{"outcome": outcome, "by": "ops"}}
	}
	observe(t, m, ev(driver.AskAnswered), ev(driver.AskAnswered), ev(driver.AskRefused), ev(driver.AskTimeout), ev("made-up"))
	expect(t, series(t, m.Registry()), map[string]float64{
		`agent_worker_asks_total{agent="oncall",outcome="answered"}`:  2,
		`agent_worker_asks_total{agent="oncall",outcome="refused"}`:   1,
		`agent_worker_asks_total{agent="oncall",outcome="timeout"}`:   1,
		`agent_worker_asks_total{agent="oncall",outcome="other"}`:     1,
		`agent_worker_asks_total{agent="oncall",outcome="failed"}`:    0,
		`agent_worker_asks_total{agent="oncall",outcome="cancelled"}`: 0,
		`agent_worker_asks_total{agent="demo",outcome="answered"}`:    0,
	})
}
