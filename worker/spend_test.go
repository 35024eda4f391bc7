package worker

import (
	"testing"

	"github.com/agent-worker/agent-worker/internal/wait"
)

// The spend and ceiling gauges follow the guard: after a priced turn the
// session and day windows show what it cost, next to their ceilings.
func TestSpendGaugesMoveAfterAPricedTurn(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, setup{
		top:    "pricing:\n  fake: {input_per_mtok: 1000}\n",
		agent:  "    budgets: {session_usd: 5, daily_usd: 2}",
		script: `[{text: "noted", usage: {input: 1000, output: 0}}]`, // $1 a turn
	})
	r := start(t, cfg, newRecorder(), nil)
	before := metricSeries(t, r.w)
	if v, ok := before[`agent_worker_ceiling_usd{agent="triage",window="day"}`]; !ok || v != 2 {
		t.Fatalf("daily ceiling before any turn: %v %v", v, ok)
	}
	r.publish("agents.triage.inbox", "hello")
	r.waitEvent("turn-completed")
	wait.Within(t, deadline, "the spend gauges to show the turn", func() bool {
		m := metricSeries(t, r.w)
		return m[`agent_worker_spend_usd{agent="triage",window="session"}`] == 1 && m[`agent_worker_spend_usd{agent="triage",window="day"}`] == 1
	})
	m := metricSeries(t, r.w)
	if m[`agent_worker_ceiling_usd{agent="triage",window="session"}`] != 5 || m[`agent_worker_spend_usd{agent="triage",window="turn"}`] != 1 {
		t.Fatalf("gauges %v", m)
	}
}
