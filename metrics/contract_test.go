package metrics_test

import (
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/background"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/inbox/natsinbox"
	"github.com/agent-worker/agent-worker/metrics"
	"github.com/agent-worker/agent-worker/models"
	"github.com/agent-worker/agent-worker/natsbus"
	"github.com/agent-worker/agent-worker/scheduler"
	"github.com/agent-worker/agent-worker/watchdog"
)

// The metrics package does not import the packages that publish events
// (they sit beside or above it); this test holds it to their event types
// and label values: every value a publisher can send lands in its own
// series, never in "other".
func TestPublishersValuesHaveTheirOwnSeries(t *testing.T) {
	t.Parallel()
	m := metrics.New(testAgents(), nil)
	var evs []events.Event
	add := func(agent, typ string, data map[string]any) {
		evs = append(evs, events.Event{Time: t0, Agent: agent, Type: typ, Data: data})
	}
	want := map[string]float64{}

	turnFailures := []string{driver.OutcomeFailed, driver.OutcomeTimeout, driver.OutcomeInterrupted,
		driver.OutcomeHalted, driver.OutcomeShutdown, driver.OutcomeCapped, driver.OutcomeUnavailable, driver.OutcomeAbandoned}
	add("oncall", events.TurnCompleted, map[string]any{"duration_ms": int64(1)})
	want[`agent_worker_turns_total{agent="oncall",outcome="`+driver.OutcomeCompleted+`"}`] = 1
	for _, o := range turnFailures {
		add("oncall", events.TurnFailed, map[string]any{"outcome": o, "duration_ms": int64(1)})
		want[`agent_worker_turns_total{agent="oncall",outcome="`+o+`"}`] = 1
	}
	for _, s := range []driver.Source{driver.SourceInbox, driver.SourceTimer, driver.SourceHeartbeat, driver.SourceSchedule,
		driver.SourceOperator, driver.SourceSubagent, driver.SourceStartup, driver.SourceRetry, driver.SourceAlertmanager} {
		add("oncall", events.Wake, map[string]any{"source": string(s)})
		want[`agent_worker_wakes_total{agent="oncall",source="`+string(s)+`"}`] = 1
	}
	for _, k := range []inbox.Kind{inbox.Wake, inbox.Deferred} {
		add("oncall", events.MessageQueued, map[string]any{"kind": string(k)})
		want[`agent_worker_messages_received_total{agent="oncall",kind="`+string(k)+`"}`] = 1
	}
	for _, r := range []string{inbox.RejectTooLarge, inbox.RejectInvalidUTF8, inbox.RejectInvalidJSON, inbox.RejectNoText, inbox.RejectEmpty} {
		add("oncall", events.MessageRejected, map[string]any{"reason": r})
		want[`agent_worker_messages_rejected_total{agent="oncall",reason="`+r+`"}`] = 1
	}
	add(natsbus.UnknownAgent, events.MessageRejected, map[string]any{"reason": natsinbox.RejectUnknownAgent})
	want[`agent_worker_messages_rejected_total{agent="`+natsbus.UnknownAgent+`",reason="`+natsinbox.RejectUnknownAgent+`"}`] = 1
	add("oncall", events.MessageDropped, map[string]any{"reason": "inbox full"})
	add("oncall", events.MessageRejected, map[string]any{"reason": inbox.RejectDropped})
	want[`agent_worker_messages_rejected_total{agent="oncall",reason="`+inbox.RejectDropped+`"}`] = 1
	add("oncall", events.MessageDropped, map[string]any{"reason": inbox.RejectOperatorDropped})
	add("oncall", events.MessageRejected, map[string]any{"reason": inbox.RejectOperatorDropped})
	want[`agent_worker_messages_rejected_total{agent="oncall",reason="`+inbox.RejectOperatorDropped+`"}`] = 1
	add("oncall", events.TurnStarted, map[string]any{"cause_at": t0.Add(-time.Second)})
	want[`agent_worker_wake_latency_seconds_count{agent="oncall"}`] = 1
	want[`agent_worker_wake_latency_seconds_sum{agent="oncall"}`] = 1
	want[`agent_worker_turn_duration_seconds_count{agent="oncall"}`] = 9
	want[`agent_worker_turn_duration_seconds_sum{agent="oncall"}`] = 0.009
	for _, r := range []string{"failure", "outage"} {
		add("oncall", events.RetryScheduled, map[string]any{"reason": r})
		want[`agent_worker_turn_retries_total{agent="oncall",reason="`+r+`"}`] = 1
	}
	add("oncall", events.ApprovalRequested, map[string]any{"id": "x"})
	want[`agent_worker_approvals_total{agent="oncall",outcome="requested"}`] = 1
	for _, d := range []string{"approved", "denied", "expired"} {
		add("oncall", events.ApprovalDecided, map[string]any{"decision": d})
		want[`agent_worker_approvals_total{agent="oncall",outcome="`+d+`"}`] = 1
	}
	add("oncall", events.TurnResumed, map[string]any{"steps": 2})
	want[`agent_worker_turns_resumed_total{agent="oncall"}`] = 1
	for _, r := range []string{"interrupted", "halted", "timeout", "capped", "expired", "inputs_missing", "too_large"} {
		add("oncall", events.JournalAbandoned, map[string]any{"reason": r})
		want[`agent_worker_turn_journals_abandoned_total{agent="oncall",reason="`+r+`"}`] = 1
	}
	for _, r := range []string{"max_per_wake", "turns_per_hour"} {
		add("oncall", events.Throttled, map[string]any{"reason": r})
		want[`agent_worker_turns_throttled_total{agent="oncall",reason="`+r+`"}`] = 1
	}
	add("oncall", events.WakeDropped, map[string]any{"source": string(driver.SourceSchedule)})
	want[`agent_worker_wakes_dropped_total{agent="oncall",source="schedule"}`] = 1
	add("oncall", events.MessageQueued, map[string]any{"kind": string(inbox.Wake), "redelivered": true})
	want[`agent_worker_messages_redelivered_total{agent="oncall",kind="inbox"}`] = 1

	add("oncall", guard.EventCharged, map[string]any{"input_tokens": 5, "cost_usd": 0.5})
	add("oncall", guard.EventModelError, map[string]any{"error": "boom"})
	for _, o := range []string{"retry", "rate_limited"} {
		add("oncall", models.EventRetry, map[string]any{"outcome": o})
	}
	want[`agent_worker_model_requests_total{agent="oncall",model="gpt-4.1-mini",outcome="ok"}`] = 1
	want[`agent_worker_model_requests_total{agent="oncall",model="gpt-4.1-mini",outcome="error"}`] = 1
	want[`agent_worker_model_requests_total{agent="oncall",model="gpt-4.1-mini",outcome="retry"}`] = 1
	want[`agent_worker_model_requests_total{agent="oncall",model="gpt-4.1-mini",outcome="rate_limited"}`] = 1
	want[`agent_worker_model_tokens_total{agent="oncall",model="gpt-4.1-mini",type="input"}`] = 5
	want[`agent_worker_model_cost_usd_total{agent="oncall",model="gpt-4.1-mini",priced="true"}`] = 0.5
	add("oncall", guard.EventToolCall, map[string]any{"tool": "publish", "outcome": "ok"})
	add("oncall", guard.EventToolCall, map[string]any{"tool": "publish", "outcome": "error"})
	want[`agent_worker_tool_calls_total{agent="oncall",outcome="ok",tool="publish"}`] = 1
	want[`agent_worker_tool_calls_total{agent="oncall",outcome="error",tool="publish"}`] = 1
	for _, g := range []string{guard.Turn, guard.Session, guard.Daily, guard.WorkerDaily, guard.Watchdog, watchdog.Guardrail} {
		add("demo", guard.EventTripped, map[string]any{"guardrail": g})
		want[`agent_worker_guardrail_trips_total{agent="demo",guardrail="`+g+`"}`]++
	}
	for _, s := range []string{watchdog.SignalRepeat, watchdog.SignalCycle, watchdog.SignalDominant, watchdog.SignalFailures, watchdog.SignalTurnRepeat} {
		add("demo", watchdog.EventAlert, map[string]any{"signal": s})
		want[`agent_worker_watchdog_alerts_total{agent="demo",signal="`+s+`"}`] = 1
	}
	add("oncall", background.EventStarted, map[string]any{"id": "oncall-sub-1", "run": 2, "replica": "r2"})
	want[`agent_worker_subagent_reruns_total{agent="oncall"}`] = 1
	for _, o := range []string{scheduler.OutcomeFired, scheduler.OutcomeMissed, scheduler.OutcomeSkippedOverlap,
		scheduler.OutcomeSkippedPaused, scheduler.OutcomeSkippedHalted} {
		add("oncall", scheduler.EventScheduleRun, map[string]any{"schedule": "morning", "outcome": o, "due": t0})
		want[`agent_worker_schedule_runs_total{agent="oncall",outcome="`+o+`",schedule="morning"}`] = 1
	}
	want[`agent_worker_schedule_last_run_timestamp_seconds{agent="oncall",schedule="morning"}`] = float64(t0.Unix())

	// The operator API reports to the metrics directly (api.Observer).
	var _ api.Observer = m
	for _, o := range []string{api.OutcomeAccepted, api.OutcomeDuplicate, api.OutcomeRejected, api.OutcomeTruncated} {
		m.AlertmanagerNotification("oncall", o)
		want[`agent_worker_alertmanager_notifications_total{agent="oncall",outcome="`+o+`"}`] = 1
	}
	m.HTTPRequest(api.RouteOther, 404, 0)
	want[`agent_worker_http_requests_total{code="404",route="`+api.RouteOther+`"}`] = 1
	want[`agent_worker_http_request_duration_seconds_count{route="`+api.RouteOther+`"}`] = 1
	m.AuthFailure(api.RouteOther)
	want[`agent_worker_auth_failures_total{route="`+api.RouteOther+`"}`] = 1

	observe(t, m, evs...)
	got := series(t, m.Registry())
	expect(t, got, want)
	for k, v := range got {
		if _, ok := want[k]; !ok && v != 0 {
			t.Errorf("%s = %g: a publisher's value was not counted under its own label", k, v)
		}
	}
}

// Every driver state gets its own agent_state series.
func TestDriverStatesHaveTheirOwnSeries(t *testing.T) {
	t.Parallel()
	for _, s := range driver.States {
		src := &source{}
		src.set(metrics.AgentGauges{Name: "demo", State: string(s)})
		got := series(t, metrics.New(testAgents(), src).Registry())
		expect(t, got, map[string]float64{`agent_worker_agent_state{agent="demo",state="` + string(s) + `"}`: 1})
	}
	if len(driver.States) != 6 {
		t.Errorf("driver has %d states; agent_state knows 6", len(driver.States))
	}
}
