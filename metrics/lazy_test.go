package metrics_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/metrics"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// perAgentCounters are the counter families with an agent label.
var perAgentCounters = []string{
	"agent_worker_turns_total", "agent_worker_wakes_total", "agent_worker_messages_received_total",
	"agent_worker_messages_redelivered_total", "agent_worker_turn_retries_total", "agent_worker_turns_throttled_total",
	"agent_worker_turns_resumed_total", "agent_worker_turn_journals_abandoned_total", "agent_worker_approvals_total",
	"agent_worker_wakes_dropped_total", "agent_worker_model_requests_total", "agent_worker_model_tokens_total",
	"agent_worker_model_cost_usd_total", "agent_worker_model_fallbacks_total", "agent_worker_tool_calls_total",
	"agent_worker_guardrail_trips_total", "agent_worker_watchdog_alerts_total", "agent_worker_subagents_total",
	"agent_worker_subagent_reruns_total", "agent_worker_schedule_runs_total", "agent_worker_alertmanager_notifications_total",
	"agent_worker_ownership_changes_total", "agent_worker_memory_compactions_total", "agent_worker_memory_cost_usd_total",
	"agent_worker_memory_turns_dropped_total", "agent_worker_asks_total", "agent_worker_turns_skipped_total",
}

func TestLazySeriesAppearWithTheirFirstEvent(t *testing.T) {
	t.Parallel()
	src := &source{}
	m := metrics.NewWith(testAgents(), src, metrics.Options{PerAgent: metrics.PerAgentLazy})
	if m.PerAgent() != metrics.PerAgentLazy {
		t.Fatalf("mode %q, want lazy", m.PerAgent())
	}
	next := t0.Add(time.Hour)
	src.set(
		metrics.AgentGauges{Name: "oncall", State: "paused", InboxPending: 3, NextSchedule: map[string]time.Time{"morning": next}},
		metrics.AgentGauges{Name: "demo", State: "sleeping", SubagentsRunning: 1, MemoryTokens: 40},
	)
	got := series(t, m.Registry())
	for _, name := range perAgentCounters {
		if s := family(got, name); len(s) != 0 {
			t.Errorf("%s has series before any event: %v", name, s)
		}
	}
	// The worker's own series stay: "_unknown"'s rejections, the
	// histograms (one per worker, no agent label).
	if n := len(family(got, "agent_worker_messages_rejected_total")); n != 9 {
		t.Errorf("messages_rejected_total has %d series, want _unknown's 9", n)
	}
	expect(t, got, map[string]float64{
		`agent_worker_turn_duration_seconds_count{}`:                                          0,
		`agent_worker_wake_latency_seconds_count{}`:                                           0,
		`agent_worker_agent_state{agent="oncall",state="paused"}`:                             1,
		`agent_worker_agent_state{agent="demo",state="sleeping"}`:                             1,
		`agent_worker_inbox_pending{agent="oncall"}`:                                          3,
		`agent_worker_inbox_pending{agent="demo"}`:                                            0,
		`agent_worker_agent_owned{agent="oncall"}`:                                            1,
		`agent_worker_subagents_running{agent="demo"}`:                                        1,
		`agent_worker_memory_tokens{agent="demo"}`:                                            40,
		`agent_worker_schedule_next_run_timestamp_seconds{agent="oncall",schedule="morning"}`: float64(next.Unix()),
	})
	// Zeros are left out of the gauges: the other states, no subagents,
	// an empty memory.
	if n := len(family(got, "agent_worker_agent_state")); n != 2 {
		t.Errorf("agent_state has %d series, want the current state of each agent (2): %v", n, family(got, "agent_worker_agent_state"))
	}
	for _, k := range []string{`agent_worker_subagents_running{agent="oncall"}`, `agent_worker_memory_tokens{agent="oncall"}`} {
		if _, ok := got[k]; ok {
			t.Errorf("%s exists at 0 in lazy mode", k)
		}
	}

	ev := func(typ string, data map[string]any) events.Event {
		return events.Event{Time: t0, Agent: "oncall", Type: typ, Data: data}
	}
	observe(t, m,
		ev(events.TurnStarted, map[string]any{"cause_at": t0.Add(-time.Second)}),
		ev(events.TurnCompleted, map[string]any{"duration_ms": 1500}),
		ev("guardrail-tripped", map[string]any{"guardrail": "daily_usd"}),
		ev("schedule-run", map[string]any{"schedule": "morning", "outcome": "missed"}),
		ev("model-usage", map[string]any{"model": "gpt-4.1-mini", "input_tokens": 10, "cached_input_tokens": 0}),
		events.Event{Time: t0, Agent: "demo", Type: events.TurnFailed, Data: map[string]any{"outcome": "timeout", "duration_ms": 500}},
	)
	got = series(t, m.Registry())
	expect(t, got, map[string]float64{
		`agent_worker_turns_total{agent="oncall",outcome="completed"}`:                         1,
		`agent_worker_turns_total{agent="demo",outcome="timeout"}`:                             1,
		`agent_worker_guardrail_trips_total{agent="oncall",guardrail="daily_usd"}`:             1,
		`agent_worker_schedule_runs_total{agent="oncall",outcome="missed",schedule="morning"}`: 1,
		`agent_worker_turn_duration_seconds_count{}`:                                           2,
		`agent_worker_turn_duration_seconds_sum{}`:                                             2,
		`agent_worker_wake_latency_seconds_count{}`:                                            1,
	})
	if n := len(family(got, "agent_worker_turns_total")); n != 2 {
		t.Errorf("turns_total has %d series, want the 2 that counted: %v", n, family(got, "agent_worker_turns_total"))
	}
	if n := len(family(got, "agent_worker_guardrail_trips_total")); n != 1 {
		t.Errorf("guardrail_trips_total has %d series, want 1", n)
	}
	// Only the token type that counted (no cached_input at 0), no cost at 0.
	expect(t, got, map[string]float64{
		`agent_worker_model_tokens_total{agent="oncall",model="gpt-4.1-mini",type="input"}`:   10,
		`agent_worker_model_requests_total{agent="oncall",model="gpt-4.1-mini",outcome="ok"}`: 1,
	})
	for _, name := range []string{"agent_worker_model_tokens_total", "agent_worker_model_cost_usd_total"} {
		if s := family(got, name); len(s) > 1 || (name == "agent_worker_model_cost_usd_total" && len(s) != 0) {
			t.Errorf("%s: %v, want only the series that counted", name, s)
		}
	}
}

func TestAutoIsFullUpToTheThresholdThenLazy(t *testing.T) {
	t.Parallel()
	agents := func(n int) []metrics.AgentInfo {
		infos := make([]metrics.AgentInfo, n)
		for i := range infos {
			infos[i] = metrics.AgentInfo{Name: fmt.Sprintf("a%d", i), Model: "m"}
		}
		return infos
	}
	cases := []struct {
		agents int
		opt    metrics.PerAgent
		want   metrics.PerAgent
	}{
		{metrics.AutoFullMaxAgents, "", metrics.PerAgentFull},
		{metrics.AutoFullMaxAgents, metrics.PerAgentAuto, metrics.PerAgentFull},
		{metrics.AutoFullMaxAgents + 1, "", metrics.PerAgentLazy},
		{metrics.AutoFullMaxAgents + 1, metrics.PerAgentFull, metrics.PerAgentFull},
		{2, metrics.PerAgentLazy, metrics.PerAgentLazy},
	}
	for _, c := range cases {
		m := metrics.NewWith(agents(c.agents), nil, metrics.Options{PerAgent: c.opt})
		if got := m.PerAgent(); got != c.want {
			t.Errorf("%d agents, per_agent %q: mode %q, want %q", c.agents, c.opt, got, c.want)
		}
		n, err := testutil.GatherAndCount(m.Registry(), "agent_worker_turns_total")
		if err != nil {
			t.Fatal(err)
		}
		if want := map[metrics.PerAgent]int{metrics.PerAgentFull: 9 * c.agents, metrics.PerAgentLazy: 0}[c.want]; n != want {
			t.Errorf("%d agents, mode %q: turns_total has %d series, want %d", c.agents, c.want, n, want)
		}
	}
	if !strings.Contains(strings.Join(metrics.PerAgentModes, ","), "lazy") {
		t.Errorf("PerAgentModes %v lacks lazy", metrics.PerAgentModes)
	}
}
