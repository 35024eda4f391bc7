package metrics_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/metrics"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// contract is every metric of ARCHITECTURE.md plus events_dropped_total
// and the operator API's (http_*, alertmanager_notifications_total).
var contract = []string{
	"agent_worker_turns_total",
	"agent_worker_turn_duration_seconds",
	"agent_worker_wakes_total",
	"agent_worker_wake_latency_seconds",
	"agent_worker_messages_received_total",
	"agent_worker_messages_rejected_total",
	"agent_worker_inbox_pending",
	"agent_worker_agent_state",
	"agent_worker_model_requests_total",
	"agent_worker_model_tokens_total",
	"agent_worker_model_cost_usd_total",
	"agent_worker_tool_calls_total",
	"agent_worker_guardrail_trips_total",
	"agent_worker_watchdog_alerts_total",
	"agent_worker_subagents_running",
	"agent_worker_subagents_total",
	"agent_worker_schedule_runs_total",
	"agent_worker_schedule_last_run_timestamp_seconds",
	"agent_worker_schedule_next_run_timestamp_seconds",
	"agent_worker_events_dropped_total",
	"agent_worker_http_requests_total",
	"agent_worker_http_request_duration_seconds",
	"agent_worker_auth_failures_total",
	"agent_worker_alertmanager_notifications_total",
}

func TestPrecreatedSeriesAreZeroBeforeAnyEvent(t *testing.T) {
	t.Parallel()
	m := metrics.New(testAgents(), nil)
	got := series(t, m.Registry())

	// oncall: 2 tools, 1 schedule; demo: none. Rejections also for _unknown.
	counts := map[string]int{
		"agent_worker_turns_total":                         2 * 9,
		"agent_worker_turn_duration_seconds":               2,
		"agent_worker_wakes_total":                         2 * 9,
		"agent_worker_messages_redelivered_total":          2 * 2,
		"agent_worker_turn_retries_total":                  2 * 2,
		"agent_worker_turns_resumed_total":                 2,
		"agent_worker_approvals_total":                     2 * 4,
		"agent_worker_turn_journals_abandoned_total":       2 * 7,
		"agent_worker_turns_throttled_total":               2 * 2,
		"agent_worker_wakes_dropped_total":                 2 * 9,
		"agent_worker_dependency_up":                       0, // nil Source
		"agent_worker_wake_latency_seconds":                2,
		"agent_worker_messages_received_total":             2 * 2,
		"agent_worker_messages_rejected_total":             3 * 9,
		"agent_worker_turns_skipped_total":                 2,
		"agent_worker_model_requests_total":                2 * 4,
		"agent_worker_model_tokens_total":                  2 * 4,
		"agent_worker_model_cost_usd_total":                2,
		"agent_worker_tool_calls_total":                    2 * 2,
		"agent_worker_guardrail_trips_total":               2 * 5,
		"agent_worker_watchdog_alerts_total":               2 * 5,
		"agent_worker_subagents_total":                     2 * 4,
		"agent_worker_subagent_reruns_total":               2,
		"agent_worker_schedule_runs_total":                 5,
		"agent_worker_events_dropped_total":                2,
		"agent_worker_schedule_last_run_timestamp_seconds": 0, // set on the first fire
		"agent_worker_inbox_pending":                       0, // nil Source
		"agent_worker_agent_state":                         0,
		"agent_worker_subagents_running":                   0,
		"agent_worker_schedule_next_run_timestamp_seconds": 0,
		"agent_worker_alertmanager_notifications_total":    2 * 4,
		"agent_worker_http_requests_total":                 0, // codes are not a fixed set
		"agent_worker_http_request_duration_seconds":       0, // until SetHTTPRoutes
	}
	for name, want := range counts {
		n, err := testutil.GatherAndCount(m.Registry(), name)
		if err != nil {
			t.Fatalf("count %s: %v", name, err)
		}
		if n != want {
			t.Errorf("%s has %d series, want %d", name, n, want)
		}
	}
	for k, v := range got {
		if v != 0 {
			t.Errorf("%s = %g before any event, want 0", k, v)
		}
	}
	expect(t, got, map[string]float64{
		`agent_worker_turns_total{agent="oncall",outcome="completed"}`:                                  0,
		`agent_worker_turns_total{agent="demo",outcome="capped"}`:                                       0,
		`agent_worker_turn_duration_seconds_count{agent="demo"}`:                                        0,
		`agent_worker_wakes_total{agent="demo",source="startup"}`:                                       0,
		`agent_worker_wake_latency_seconds_count{agent="oncall"}`:                                       0,
		`agent_worker_messages_received_total{agent="oncall",kind="deferred"}`:                          0,
		`agent_worker_messages_rejected_total{agent="_unknown",reason="unknown_agent"}`:                 0,
		`agent_worker_messages_rejected_total{agent="oncall",reason="dropped"}`:                         0,
		`agent_worker_model_requests_total{agent="oncall",model="gpt-4.1-mini",outcome="error"}`:        0,
		`agent_worker_model_tokens_total{agent="demo",model="fake-1",type="cache_write"}`:               0,
		`agent_worker_model_cost_usd_total{agent="oncall",model="gpt-4.1-mini",priced="true"}`:          0,
		`agent_worker_model_cost_usd_total{agent="demo",model="fake-1",priced="false"}`:                 0,
		`agent_worker_tool_calls_total{agent="oncall",outcome="ok",tool="report_done"}`:                 0,
		`agent_worker_guardrail_trips_total{agent="oncall",guardrail="worker_daily_usd"}`:               0,
		`agent_worker_watchdog_alerts_total{agent="demo",signal="failures"}`:                            0,
		`agent_worker_subagents_total{agent="oncall",outcome="timeout"}`:                                0,
		`agent_worker_schedule_runs_total{agent="oncall",outcome="skipped_overlap",schedule="morning"}`: 0,
		`agent_worker_events_dropped_total{reason="overflow"}`:                                          0,
		`agent_worker_events_dropped_total{reason="unconfigured"}`:                                      0,
		`agent_worker_wakes_total{agent="oncall",source="alertmanager"}`:                                0,
		`agent_worker_alertmanager_notifications_total{agent="demo",outcome="truncated"}`:               0,
	})
}

func TestEventsUpdateMetrics(t *testing.T) {
	t.Parallel()
	ev := func(agent, typ string, data map[string]any) events.Event {
		return events.Event{Time: t0, Agent: agent, Type: typ, Data: data}
	}
	cases := []struct {
		name   string
		events []events.Event
		want   map[string]float64
		absent []string // substrings no series may contain
	}{{
		name: "turns",
		events: []events.Event{
			ev("oncall", events.TurnCompleted, map[string]any{"duration_ms": int64(1500)}),
			ev("oncall", events.TurnFailed, map[string]any{"outcome": "timeout", "duration_ms": int64(2000)}),
			ev("oncall", events.TurnFailed, map[string]any{"outcome": "capped", "duration_ms": 500}),
			ev("oncall", events.TurnFailed, map[string]any{"outcome": "exploded"}), // no duration: not observed
			ev("demo", events.TurnCompleted, map[string]any{"duration_ms": float64(100)}),
		},
		want: map[string]float64{
			`agent_worker_turns_total{agent="oncall",outcome="completed"}`: 1,
			`agent_worker_turns_total{agent="oncall",outcome="timeout"}`:   1,
			`agent_worker_turns_total{agent="oncall",outcome="capped"}`:    1,
			`agent_worker_turns_total{agent="oncall",outcome="failed"}`:    0,
			`agent_worker_turns_total{agent="oncall",outcome="other"}`:     1,
			`agent_worker_turns_total{agent="demo",outcome="completed"}`:   1,
			`agent_worker_turn_duration_seconds_count{agent="oncall"}`:     3,
			`agent_worker_turn_duration_seconds_sum{agent="oncall"}`:       4,
			`agent_worker_turn_duration_seconds_count{agent="demo"}`:       1,
			`agent_worker_turn_duration_seconds_sum{agent="demo"}`:         0.1,
		},
		absent: []string{"exploded"},
	}, {
		name: "wakes",
		events: []events.Event{
			ev("oncall", events.Wake, map[string]any{"source": "inbox"}),
			ev("oncall", events.Wake, map[string]any{"source": "inbox"}),
			ev("oncall", events.Wake, map[string]any{"source": "schedule", "name": "morning"}),
			ev("oncall", events.Wake, map[string]any{"source": "telepathy"}),
		},
		want: map[string]float64{
			`agent_worker_wakes_total{agent="oncall",source="inbox"}`:    2,
			`agent_worker_wakes_total{agent="oncall",source="schedule"}`: 1,
			`agent_worker_wakes_total{agent="oncall",source="timer"}`:    0,
			`agent_worker_wakes_total{agent="oncall",source="other"}`:    1,
		},
		absent: []string{"telepathy"},
	}, {
		name: "wake latency",
		events: []events.Event{
			ev("oncall", events.TurnStarted, map[string]any{"cause_at": t0.Add(-250 * time.Millisecond)}),
			ev("oncall", events.TurnStarted, map[string]any{"turn": 2}),                          // no cause: not observed
			ev("oncall", events.TurnStarted, map[string]any{"cause_at": t0.Add(time.Second)}),    // skewed: 0
			ev("demo", events.TurnStarted, map[string]any{"cause_at": t0.Add(-3 * time.Second)}), // 3s
		},
		want: map[string]float64{
			`agent_worker_wake_latency_seconds_count{agent="oncall"}`: 2,
			`agent_worker_wake_latency_seconds_sum{agent="oncall"}`:   0.25,
			`agent_worker_wake_latency_seconds_count{agent="demo"}`:   1,
			`agent_worker_wake_latency_seconds_sum{agent="demo"}`:     3,
		},
	}, {
		name: "messages received",
		events: []events.Event{
			ev("oncall", events.MessageQueued, map[string]any{"kind": "inbox"}),
			ev("oncall", events.MessageQueued, map[string]any{"kind": "deferred"}),
			ev("oncall", events.MessageQueued, map[string]any{"kind": "deferred"}),
			ev("oncall", events.MessageQueued, map[string]any{"kind": "urgent"}),
		},
		want: map[string]float64{
			`agent_worker_messages_received_total{agent="oncall",kind="inbox"}`:    1,
			`agent_worker_messages_received_total{agent="oncall",kind="deferred"}`: 2,
			`agent_worker_messages_received_total{agent="oncall",kind="other"}`:    1,
		},
	}, {
		name: "messages rejected and dropped",
		events: []events.Event{
			ev("oncall", events.MessageRejected, map[string]any{"reason": "too_large"}),
			ev("_unknown", events.MessageRejected, map[string]any{"reason": "unknown_agent"}),
			ev("oncall", events.MessageRejected, map[string]any{"reason": "cosmic_ray"}),
			// One message dropped over JetStream: the driver's event and
			// the binding's dead-letter count once.
			ev("oncall", events.MessageDropped, map[string]any{"reason": "inbox full"}),
			ev("oncall", events.MessageRejected, map[string]any{"reason": "dropped"}),
			// A drop of a core NATS message: the driver's event only.
			ev("demo", events.MessageDropped, map[string]any{"reason": "failed 3 turns"}),
			// An operator abandoned a queued message: the driver's event
			// and the binding's dead-letter count once, under their reason.
			ev("demo", events.MessageDropped, map[string]any{"reason": "operator_dropped"}),
			ev("demo", events.MessageRejected, map[string]any{"reason": "operator_dropped"}),
			// A message of a turn cut at a per-turn limit: likewise.
			ev("demo", events.MessageDropped, map[string]any{"reason": "turn_cap"}),
			ev("demo", events.MessageRejected, map[string]any{"reason": "turn_cap"}),
			// A wake with nothing to do ran no turn.
			ev("oncall", events.TurnSkipped, map[string]any{"reason": "nothing_to_do"}),
			ev("ghost", events.MessageRejected, map[string]any{"reason": "empty"}),
			ev("oncall", events.MessageUnsealed, map[string]any{"via": "subagent"}),
			ev("ghost", events.MessageUnsealed, map[string]any{"via": "subagent"}),
		},
		want: map[string]float64{
			`agent_worker_messages_rejected_total{agent="oncall",reason="too_large"}`:       1,
			`agent_worker_messages_rejected_total{agent="_unknown",reason="unknown_agent"}`: 1,
			`agent_worker_messages_rejected_total{agent="oncall",reason="other"}`:           1,
			`agent_worker_messages_rejected_total{agent="oncall",reason="dropped"}`:         1,
			`agent_worker_messages_rejected_total{agent="demo",reason="dropped"}`:           1,
			`agent_worker_messages_rejected_total{agent="demo",reason="operator_dropped"}`:  1,
			`agent_worker_messages_rejected_total{agent="demo",reason="turn_cap"}`:          1,
			`agent_worker_turns_skipped_total{agent="oncall",reason="nothing_to_do"}`:       1,
			`agent_worker_messages_unsealed_total{agent="oncall"}`:                          1,
			`agent_worker_events_dropped_total{reason="unconfigured"}`:                      2,
		},
		absent: []string{"ghost", "cosmic_ray", "inbox full"},
	}, {
		name: "model usage, errors and cost",
		events: []events.Event{
			ev("oncall", "model-usage", map[string]any{"model": "gpt-4.1-mini", "input_tokens": 1200, "cached_input_tokens": int64(200),
				"cache_write_tokens": uint64(0), "output_tokens": 80, "cost_usd": 0.0015, "priced": true}),
			// The model label comes from the config, not the event.
			ev("oncall", "model-usage", map[string]any{"model": "injected-by-a-prompt", "input_tokens": 1200, "cached_input_tokens": int64(200),
				"output_tokens": int32(80), "cost_usd": 0.0015}),
			ev("oncall", "model-error", map[string]any{"model": "gpt-4.1-mini", "error": "429"}),
			// A negative or non-numeric value is not added (a counter never goes down).
			ev("demo", "model-usage", map[string]any{"input_tokens": -5, "output_tokens": "7", "cost_usd": "free"}),
		},
		want: map[string]float64{
			`agent_worker_model_requests_total{agent="oncall",model="gpt-4.1-mini",outcome="ok"}`:      2,
			`agent_worker_model_requests_total{agent="oncall",model="gpt-4.1-mini",outcome="error"}`:   1,
			`agent_worker_model_tokens_total{agent="oncall",model="gpt-4.1-mini",type="input"}`:        2400,
			`agent_worker_model_tokens_total{agent="oncall",model="gpt-4.1-mini",type="cached_input"}`: 400,
			`agent_worker_model_tokens_total{agent="oncall",model="gpt-4.1-mini",type="cache_write"}`:  0,
			`agent_worker_model_tokens_total{agent="oncall",model="gpt-4.1-mini",type="output"}`:       160,
			`agent_worker_model_cost_usd_total{agent="oncall",model="gpt-4.1-mini",priced="true"}`:     0.003,
			`agent_worker_model_requests_total{agent="demo",model="fake-1",outcome="ok"}`:              1,
			`agent_worker_model_tokens_total{agent="demo",model="fake-1",type="input"}`:                0,
			`agent_worker_model_tokens_total{agent="demo",model="fake-1",type="output"}`:               7,
			`agent_worker_model_cost_usd_total{agent="demo",model="fake-1",priced="false"}`:            0,
		},
		absent: []string{"injected-by-a-prompt"},
	}, {
		name: "tool calls",
		events: []events.Event{
			ev("oncall", "tool-call", map[string]any{"tool": "publish", "outcome": "ok"}),
			ev("oncall", "tool-call", map[string]any{"tool": "publish", "outcome": "error"}),
			ev("oncall", "tool-call", map[string]any{"tool": "rm_rf_slash", "outcome": "ok"}),
			ev("oncall", "tool-call", map[string]any{"tool": "report_done", "outcome": "meh"}),
			ev("demo", "tool-call", map[string]any{"tool": "publish", "outcome": "ok"}), // not demo's tool
		},
		want: map[string]float64{
			`agent_worker_tool_calls_total{agent="oncall",outcome="ok",tool="publish"}`:        1,
			`agent_worker_tool_calls_total{agent="oncall",outcome="error",tool="publish"}`:     1,
			`agent_worker_tool_calls_total{agent="oncall",outcome="ok",tool="other"}`:          1,
			`agent_worker_tool_calls_total{agent="oncall",outcome="other",tool="report_done"}`: 1,
			`agent_worker_tool_calls_total{agent="demo",outcome="ok",tool="other"}`:            1,
		},
		absent: []string{"rm_rf_slash", `agent="demo",outcome="ok",tool="publish"`},
	}, {
		name: "guardrail trips",
		events: []events.Event{
			ev("oncall", "guardrail-tripped", map[string]any{"guardrail": "daily_usd", "spent_usd": 20.5}),
			ev("oncall", "guardrail-tripped", map[string]any{"guardrail": "watchdog"}),
			ev("oncall", "guardrail-tripped", map[string]any{"guardrail": "vibes"}),
		},
		want: map[string]float64{
			`agent_worker_guardrail_trips_total{agent="oncall",guardrail="daily_usd"}`: 1,
			`agent_worker_guardrail_trips_total{agent="oncall",guardrail="watchdog"}`:  1,
			`agent_worker_guardrail_trips_total{agent="oncall",guardrail="turn_usd"}`:  0,
			`agent_worker_guardrail_trips_total{agent="oncall",guardrail="other"}`:     1,
		},
		absent: []string{"vibes"},
	}, {
		name: "watchdog alerts",
		events: []events.Event{
			ev("oncall", "watchdog-alert", map[string]any{"signal": "repeat", "calls": 5}),
			ev("oncall", "watchdog-alert", map[string]any{"signal": "cycle"}),
			ev("oncall", "watchdog-alert", map[string]any{"signal": "zigzag"}),
		},
		want: map[string]float64{
			`agent_worker_watchdog_alerts_total{agent="oncall",signal="repeat"}`: 1,
			`agent_worker_watchdog_alerts_total{agent="oncall",signal="cycle"}`:  1,
			`agent_worker_watchdog_alerts_total{agent="oncall",signal="other"}`:  1,
		},
		absent: []string{"zigzag"},
	}, {
		name: "subagents",
		events: []events.Event{
			ev("oncall", "subagent-finished", map[string]any{"outcome": "completed"}),
			ev("oncall", "subagent-finished", map[string]any{"outcome": "timeout"}),
			ev("oncall", "subagent-finished", map[string]any{"outcome": "vanished"}),
		},
		want: map[string]float64{
			`agent_worker_subagents_total{agent="oncall",outcome="completed"}`: 1,
			`agent_worker_subagents_total{agent="oncall",outcome="timeout"}`:   1,
			`agent_worker_subagents_total{agent="oncall",outcome="other"}`:     1,
		},
	}, {
		name: "subagent runs again",
		events: []events.Event{
			ev("oncall", "subagent-started", map[string]any{"id": "oncall-sub-1", "run": 1}),
			ev("oncall", "subagent-started", map[string]any{"id": "oncall-sub-2", "run": 2}),
			ev("oncall", "subagent-started", map[string]any{"id": "oncall-sub-2", "run": int64(3)}),
			ev("oncall", "subagent-started", map[string]any{"id": "oncall-sub-3"}), // local: no run
		},
		want: map[string]float64{
			`agent_worker_subagent_reruns_total{agent="oncall"}`: 2,
		},
	}, {
		name: "schedule runs",
		events: []events.Event{
			ev("oncall", "schedule-run", map[string]any{"schedule": "morning", "outcome": "missed", "due": t0.Add(-24 * time.Hour)}),
			ev("oncall", "schedule-run", map[string]any{"schedule": "morning", "outcome": "fired", "due": t0, "next": t0.Add(24 * time.Hour)}),
			ev("oncall", "schedule-run", map[string]any{"schedule": "morning", "outcome": "skipped_paused", "due": t0.Add(time.Hour)}),
			ev("oncall", "schedule-run", map[string]any{"schedule": "morning", "outcome": "teleported"}),
			ev("oncall", "schedule-run", map[string]any{"schedule": "evening", "outcome": "fired", "due": t0}), // not configured
			ev("demo", "schedule-run", map[string]any{"schedule": "morning", "outcome": "fired", "due": t0}),   // not demo's
		},
		want: map[string]float64{
			`agent_worker_schedule_runs_total{agent="oncall",outcome="fired",schedule="morning"}`:          1,
			`agent_worker_schedule_runs_total{agent="oncall",outcome="missed",schedule="morning"}`:         1,
			`agent_worker_schedule_runs_total{agent="oncall",outcome="skipped_paused",schedule="morning"}`: 1,
			`agent_worker_schedule_runs_total{agent="oncall",outcome="skipped_halted",schedule="morning"}`: 0,
			`agent_worker_schedule_runs_total{agent="oncall",outcome="other",schedule="morning"}`:          1,
			`agent_worker_schedule_last_run_timestamp_seconds{agent="oncall",schedule="morning"}`:          float64(t0.Unix()),
			`agent_worker_events_dropped_total{reason="unconfigured"}`:                                     2,
		},
		absent: []string{"evening", "teleported", `agent="demo",schedule="morning"`},
	}, {
		name: "unconfigured agents and uncounted types",
		events: []events.Event{
			ev("ghost", events.TurnCompleted, map[string]any{"duration_ms": 10}),
			ev("ghost", "tool-call", map[string]any{"tool": "publish", "outcome": "ok"}),
			ev("oncall", events.Paused, nil),
			ev("oncall", "turn-capped", map[string]any{"limit": "tokens_per_turn"}),
		},
		want: map[string]float64{
			`agent_worker_events_dropped_total{reason="unconfigured"}`: 2,
			`agent_worker_events_dropped_total{reason="overflow"}`:     0,
		},
		absent: []string{"ghost"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := metrics.New(testAgents(), nil)
			observe(t, m, tc.events...)
			got := series(t, m.Registry())
			expect(t, got, tc.want)
			for k, v := range got {
				if _, checked := tc.want[k]; !checked && v != 0 {
					t.Errorf("%s = %g, not expected to change", k, v)
				}
				for _, a := range tc.absent {
					if strings.Contains(k, a) {
						t.Errorf("series %s exists; labels must stay bounded", k)
					}
				}
			}
		})
	}
}

func TestSourceGaugesAtScrape(t *testing.T) {
	t.Parallel()
	src := &source{}
	m := metrics.New(testAgents(), src)
	next := t0.Add(24 * time.Hour)
	src.set(
		metrics.AgentGauges{Name: "oncall", State: "paused", InboxPending: 3, SubagentsRunning: 2,
			NextSchedule: map[string]time.Time{"morning": next, "evening": next}},
		metrics.AgentGauges{Name: "demo", State: "dreaming", NextSchedule: map[string]time.Time{"morning": next}},
		metrics.AgentGauges{Name: "ghost", State: "running", InboxPending: 9},
		metrics.AgentGauges{Name: "oncall", State: "running", InboxPending: 99}, // duplicate: first wins
	)
	got := series(t, m.Registry())
	expect(t, got, map[string]float64{
		`agent_worker_inbox_pending{agent="oncall"}`:                                          3,
		`agent_worker_inbox_pending{agent="demo"}`:                                            0,
		`agent_worker_subagents_running{agent="oncall"}`:                                      2,
		`agent_worker_agent_state{agent="oncall",state="paused"}`:                             1,
		`agent_worker_agent_state{agent="oncall",state="running"}`:                            0,
		`agent_worker_agent_state{agent="oncall",state="sleeping"}`:                           0,
		`agent_worker_agent_state{agent="oncall",state="halted"}`:                             0,
		`agent_worker_agent_state{agent="oncall",state="stopped"}`:                            0,
		`agent_worker_schedule_next_run_timestamp_seconds{agent="oncall",schedule="morning"}`: float64(next.Unix()),
	})
	if n := len(family(got, "agent_worker_agent_state")); n != 12 {
		t.Errorf("agent_state has %d series, want 6 per configured agent (12)", n)
	}
	for k, v := range family(got, "agent_worker_agent_state") {
		if strings.Contains(k, `agent="demo"`) && v != 0 {
			t.Errorf("%s = %g: an unknown state must set none", k, v)
		}
	}
	if n := len(family(got, "agent_worker_schedule_next_run_timestamp_seconds")); n != 1 {
		t.Errorf("schedule_next_run has %d series, want 1 (only configured schedules): %v", n, family(got, "agent_worker_schedule_next_run_timestamp_seconds"))
	}
	for k := range got {
		if strings.Contains(k, "ghost") {
			t.Errorf("series %s of an unconfigured agent", k)
		}
	}

	// The next scrape asks again.
	src.set(metrics.AgentGauges{Name: "oncall", State: "running", NextSchedule: map[string]time.Time{"morning": {}}})
	got = series(t, m.Registry())
	expect(t, got, map[string]float64{
		`agent_worker_inbox_pending{agent="oncall"}`:               0,
		`agent_worker_agent_state{agent="oncall",state="running"}`: 1,
		`agent_worker_agent_state{agent="oncall",state="paused"}`:  0,
	})
	if s := family(got, "agent_worker_schedule_next_run_timestamp_seconds"); len(s) != 0 {
		t.Errorf("a zero next fire must have no series: %v", s)
	}
	if s := family(got, "agent_worker_inbox_pending"); len(s) != 1 {
		t.Errorf("an agent the Source no longer reports must have no series: %v", s)
	}
}

func TestInstancesShareNothing(t *testing.T) {
	t.Parallel()
	a := metrics.New(testAgents(), nil)
	b := metrics.New(testAgents(), nil) // a global registry would panic here
	observe(t, a, events.Event{Agent: "oncall", Type: events.TurnCompleted, Data: map[string]any{"duration_ms": 10}})
	key := `agent_worker_turns_total{agent="oncall",outcome="completed"}`
	if got := series(t, a.Registry())[key]; got != 1 {
		t.Errorf("a: %s = %g, want 1", key, got)
	}
	if got := series(t, b.Registry())[key]; got != 0 {
		t.Errorf("b: %s = %g, want 0: instances share state", key, got)
	}
	if a.Registry() == b.Registry() {
		t.Error("instances share a registry")
	}
}

func TestStopWaitsAndIsIdempotent(t *testing.T) {
	t.Parallel()
	m := metrics.New(testAgents(), nil)
	bus := events.NewBus(0, nil)
	stop := m.Observe(bus)
	const n = 5000
	for range n {
		bus.Publish(events.Event{Agent: "oncall", Type: events.Wake, Data: map[string]any{"source": "timer"}})
	}
	stop()
	stop()
	// After stop, nothing more is counted.
	bus.Publish(events.Event{Agent: "oncall", Type: events.Wake, Data: map[string]any{"source": "timer"}})
	expect(t, series(t, m.Registry()), map[string]float64{
		`agent_worker_wakes_total{agent="oncall",source="timer"}`: n,
		`agent_worker_events_dropped_total{reason="overflow"}`:    0,
	})
}

// scrape returns the text exposition Handler serves.
func scrape(t *testing.T, m *metrics.Metrics) []byte {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("Content-Type %q, want text/plain", ct)
	}
	return rec.Body.Bytes()
}

// busy returns metrics with a source and some of every event counted, so
// every family has series.
func busy(t *testing.T) *metrics.Metrics {
	t.Helper()
	src := &source{}
	src.set(metrics.AgentGauges{Name: "oncall", State: "running", InboxPending: 1, NextSchedule: map[string]time.Time{"morning": t0.Add(time.Hour)}})
	m := metrics.New(testAgents(), src)
	ev := func(typ string, data map[string]any) events.Event {
		return events.Event{Time: t0, Agent: "oncall", Type: typ, Data: data}
	}
	observe(t, m,
		ev(events.TurnStarted, map[string]any{"cause_at": t0.Add(-time.Second)}),
		ev(events.TurnCompleted, map[string]any{"duration_ms": int64(4200)}),
		ev("model-usage", map[string]any{"input_tokens": 10, "output_tokens": 2, "cost_usd": 0.25}),
		ev("tool-call", map[string]any{"tool": "made_up", "outcome": "ok"}),
		ev("schedule-run", map[string]any{"schedule": "morning", "outcome": "fired", "due": t0}),
	)
	m.SetHTTPRoutes([]string{"POST /v1/alertmanager/{name}"})
	m.HTTPRequest("POST /v1/alertmanager/{name}", http.StatusAccepted, 20*time.Millisecond)
	m.AlertmanagerNotification("oncall", "accepted")
	return m
}

func TestHandlerServesParsableExposition(t *testing.T) {
	t.Parallel()
	m := busy(t)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(bytes.NewReader(scrape(t, m)))
	if err != nil {
		t.Fatalf("parse exposition: %v", err)
	}
	for _, name := range contract {
		if _, ok := mfs[name]; !ok {
			t.Errorf("exposition lacks %s", name)
		}
	}
	for _, name := range []string{"go_goroutines", "promhttp_metric_handler_errors_total"} {
		if _, ok := mfs[name]; !ok {
			t.Errorf("exposition lacks %s", name)
		}
	}
	value := func(name string, labels map[string]string) float64 {
		t.Helper()
		mf := mfs[name]
	next:
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue next
				}
			}
			if c := s.GetCounter(); c != nil {
				return c.GetValue()
			}
			if g := s.GetGauge(); g != nil {
				return g.GetValue()
			}
			if h := s.GetHistogram(); h != nil {
				return h.GetSampleSum()
			}
		}
		t.Fatalf("%s%v not exposed", name, labels)
		return 0
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"agent_worker_turns_total", map[string]string{"agent": "oncall", "outcome": "completed"}, 1},
		{"agent_worker_turn_duration_seconds", map[string]string{"agent": "oncall"}, 4.2},
		{"agent_worker_model_cost_usd_total", map[string]string{"agent": "oncall", "model": "gpt-4.1-mini", "priced": "true"}, 0.25},
		{"agent_worker_tool_calls_total", map[string]string{"agent": "oncall", "tool": "other", "outcome": "ok"}, 1},
		{"agent_worker_agent_state", map[string]string{"agent": "oncall", "state": "running"}, 1},
		{"agent_worker_schedule_next_run_timestamp_seconds", map[string]string{"agent": "oncall", "schedule": "morning"}, float64(t0.Add(time.Hour).Unix())},
		{"agent_worker_schedule_last_run_timestamp_seconds", map[string]string{"agent": "oncall", "schedule": "morning"}, float64(t0.Unix())},
	} {
		if got := value(c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %g, want %g", c.name, c.labels, got, c.want)
		}
	}
	if h := mfs["agent_worker_turn_duration_seconds"].GetHelp(); h == "" {
		t.Error("turn_duration_seconds has no help")
	}
}

func TestExpositionLintsClean(t *testing.T) {
	t.Parallel()
	problems, err := testutil.GatherAndLint(busy(t).Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint %s: %s", p.Metric, p.Text)
	}
}

func TestPromtoolCheckMetrics(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found on PATH (%v): install the Debian package `prometheus` (apt-get install prometheus); CI installs it", err)
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(scrape(t, busy(t)))
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}
