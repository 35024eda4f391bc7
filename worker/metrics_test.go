package worker

import (
	"net/http/httptest"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// scrape reads the worker's /metrics exposition as a Prometheus server
// would.
func scrape(t *testing.T, r *running) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	r.w.Metrics().Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// value returns the sample of fam whose labels include all of want.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	fam, ok := fams[name]
	if !ok {
		t.Fatalf("metric %s not exported", name)
	}
next:
	for _, m := range fam.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	t.Fatalf("%s has no series with labels %v", name, want)
	return 0
}

func TestMetricsAfterAScriptedTurn(t *testing.T) {
	t.Parallel()
	r := start(t, writeConfig(t, setup{top: `pricing: {fake: {input_per_mtok: 10, output_per_mtok: 20}}`}), newRecorder(), nil)
	before := scrape(t, r)
	if v := value(t, before, "agent_worker_turns_total", map[string]string{"agent": "triage", "outcome": "completed"}); v != 0 {
		t.Fatalf("turns before any turn = %v", v)
	}
	r.publish("agents.triage.inbox", "disk full on db-1")
	r.waitEvent(events.TurnCompleted)
	r.publish("agents.ghost.inbox", "for nobody")
	r.waitEvent(events.MessageRejected)
	wait.Within(t, deadline, "metrics caught up", func() bool {
		return value(t, scrape(t, r), "agent_worker_messages_rejected_total", map[string]string{"agent": "_unknown", "reason": "unknown_agent"}) == 1
	})
	f := scrape(t, r)
	a := map[string]string{"agent": "triage"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{"agent": "triage"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"agent_worker_turns_total", with("outcome", "completed"), 1},
		{"agent_worker_turn_duration_seconds", a, 1},
		{"agent_worker_wakes_total", with("source", "inbox"), 1},
		{"agent_worker_wake_latency_seconds", a, 1},
		{"agent_worker_messages_received_total", with("kind", "inbox"), 1},
		{"agent_worker_inbox_pending", a, 0},
		{"agent_worker_agent_state", with("state", "sleeping"), 1},
		{"agent_worker_agent_state", with("state", "running"), 0},
		{"agent_worker_model_requests_total", with("model", "fake", "outcome", "ok"), 1},
		{"agent_worker_model_tokens_total", with("type", "input"), 100},
		{"agent_worker_model_tokens_total", with("type", "output"), 10},
		{"agent_worker_model_cost_usd_total", with("priced", "true"), (100*10 + 10*20) / 1e6},
		{"agent_worker_guardrail_trips_total", with("guardrail", "session_usd"), 0},
		{"agent_worker_watchdog_alerts_total", with("signal", "repeat"), 0},
		{"agent_worker_subagents_running", a, 0},
		{"agent_worker_subagents_total", with("outcome", "completed"), 0},
		{"agent_worker_tool_calls_total", with("tool", "schedule_next_turn", "outcome", "ok"), 0},
	} {
		if got := value(t, f, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// The turn's store round trips are counted: restoring the agent read
	// its state, recording the turn wrote it.
	if got := value(t, f, "agent_worker_store_operations_total", map[string]string{"op": "get", "outcome": "refused"}); got < 1 {
		t.Errorf("store gets that found nothing = %v, want some (the agent's first restore)", got)
	}
	if got := value(t, f, "agent_worker_store_operations_total", map[string]string{"op": "append", "outcome": "ok"}); got < 1 {
		t.Errorf("store appends = %v, want some (the turn's history record)", got)
	}
}
