package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agent-worker/agent-worker/events"
)

// Event types published by packages metrics must not import (they sit
// above it or beside it); the contract test checks them against their
// sources.
const (
	eventModelUsage       = "model-usage"       // guard.EventCharged
	eventModelError       = "model-error"       // guard.EventModelError
	eventModelRetry       = "model-retry"       // models.EventRetry: an attempt that will be retried
	eventToolCall         = "tool-call"         // guard.EventToolCall
	eventGuardrailTripped = "guardrail-tripped" // guard.EventTripped
	eventWatchdogAlert    = "watchdog-alert"    // watchdog.EventAlert
	eventScheduleRun      = "schedule-run"      // scheduler.EventScheduleRun
	eventSubagentFinished = "subagent-finished" // background, when it lands
	eventSubagentStarted  = "subagent-started"  // background.EventStarted; data "run" from 1
)

// counted is every event type that updates a metric; the subscription
// filters on it so other events never take buffer space.
var counted = map[string]bool{
	events.TurnStarted: true, events.TurnCompleted: true, events.TurnFailed: true,
	events.Wake: true, events.MessageQueued: true, events.MessageRejected: true, events.MessageDropped: true, events.MessageUnsealed: true,
	events.RetryScheduled: true, events.TurnResumed: true, events.JournalAbandoned: true, events.ApprovalRequested: true, events.ApprovalDecided: true, events.Throttled: true, events.WakeDropped: true,
	eventModelUsage: true, eventModelError: true, eventModelRetry: true, eventModelFallback: true, eventToolCall: true,
	eventGuardrailTripped: true, eventWatchdogAlert: true,
	eventScheduleRun: true, eventSubagentFinished: true, eventSubagentStarted: true,
	events.MemoryCompacted: true, events.MemoryCompactionFailed: true, events.MemoryCompactionSkipped: true, events.MemoryTurnsDropped: true,
	events.TurnSkipped: true,
	events.Asked:       true,
}

// subscriptionBuffer is how many events may wait for the observer before
// the bus starts dropping them for it (counted, never silent).
const subscriptionBuffer = 8192

// Observe subscribes to bus and updates the counters and histograms from
// its events until stop is called. stop closes the subscription, waits
// until every event already queued for it has been counted, and returns;
// calling it again does nothing. Events published before Observe are not
// counted. Events the subscription loses because its buffer is full are
// counted in agent_worker_events_dropped_total{reason="overflow"}, also
// after stop. Observing the same bus twice counts its events twice.
func (m *Metrics) Observe(bus *events.Bus) (stop func()) {
	sub := bus.Subscribe(subscriptionBuffer, func(e events.Event) bool { return counted[e.Type] })
	m.drops.watch(sub)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range sub.C {
			m.record(e)
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			sub.Close() // C closes after what is buffered; the loop drains it
			<-done
			m.drops.unwatch(sub)
		})
	}
}

// record counts one event. Events of agents not configured, and schedule
// runs of schedules not configured, are counted only as dropped
// ("unconfigured"): their names are not bounded by the config.
func (m *Metrics) record(e events.Event) {
	if e.Type == events.MessageRejected && e.Agent == unknownAgent {
		m.recordRejected(e)
		return
	}
	a := m.agents.get(e.Agent)
	if a == nil {
		m.drops.unconfigured.Add(1)
		return
	}
	switch e.Type {
	case events.TurnCompleted, events.TurnFailed, events.TurnStarted, events.Wake,
		events.RetryScheduled, events.ApprovalRequested, events.ApprovalDecided,
		events.TurnResumed, events.JournalAbandoned, events.Throttled,
		events.TurnSkipped, events.WakeDropped:
		m.recordTurn(e)
	case events.MessageQueued, events.MessageRejected, events.MessageDropped, events.MessageUnsealed:
		m.recordMessage(e)
	case eventModelUsage, eventModelError, eventModelRetry, eventModelFallback:
		m.recordModel(e, a)
	case events.MemoryCompacted, events.MemoryCompactionFailed, events.MemoryCompactionSkipped, events.MemoryTurnsDropped:
		m.memory.record(e)
	case events.Asked:
		m.asks.record(e)
	case eventToolCall, eventGuardrailTripped, eventWatchdogAlert,
		eventSubagentFinished, eventSubagentStarted, eventScheduleRun:
		m.recordWork(e, a)
	}
}

// recordTurn counts an event of a turn's life: its wake, start and end,
// retries, resumptions, approvals and throttling.
func (m *Metrics) recordTurn(e events.Event) {
	d := e.Data
	switch e.Type {
	case events.TurnCompleted:
		m.turns.WithLabelValues(e.Agent, "completed").Inc()
		m.observeDuration(e)
	case events.TurnFailed:
		m.turns.WithLabelValues(e.Agent, oneOf(text(d["outcome"]), turnOutcomes)).Inc()
		m.observeDuration(e)
	case events.TurnStarted:
		if at, ok := instant(d["cause_at"]); ok {
			// A cause stamped after the event (clock skew between
			// publishers) is no latency, not a negative one.
			m.agentObserver(m.wakeLatency, e.Agent).Observe(max(e.Time.Sub(at).Seconds(), 0))
		}
	case events.Wake:
		m.wakes.WithLabelValues(e.Agent, oneOf(text(d["source"]), wakeSources)).Inc()
	case events.RetryScheduled:
		m.retries.WithLabelValues(e.Agent, oneOf(text(d["reason"]), retryReasons)).Inc()
	case events.ApprovalRequested:
		m.approvals.WithLabelValues(e.Agent, "requested").Inc()
	case events.ApprovalDecided:
		m.approvals.WithLabelValues(e.Agent, oneOf(text(d["decision"]), approvalOutcomes)).Inc()
	case events.TurnResumed:
		m.resumed.WithLabelValues(e.Agent).Inc()
	case events.JournalAbandoned:
		m.abandoned.WithLabelValues(e.Agent, oneOf(text(d["reason"]), journalReasons)).Inc()
	case events.Throttled:
		m.throttled.WithLabelValues(e.Agent, oneOf(text(d["reason"]), throttleReasons)).Inc()
	case events.TurnSkipped:
		m.skipped.record(e)
	case events.WakeDropped:
		m.wakesDropped.WithLabelValues(e.Agent, oneOf(text(d["source"]), wakeSources)).Inc()
	}
}

// recordMessage counts an event of a message of a configured agent:
// queued, redelivered, rejected, dropped or unsealed.
func (m *Metrics) recordMessage(e events.Event) {
	d := e.Data
	switch e.Type {
	case events.MessageQueued:
		if d["redelivered"] == true {
			// Received before (by this or another process) and not handled
			// then: counted once, not once per delivery.
			m.redelivered.WithLabelValues(e.Agent, oneOf(text(d["kind"]), messageKinds)).Inc()
			return
		}
		m.received.WithLabelValues(e.Agent, oneOf(text(d["kind"]), messageKinds)).Inc()
	case events.MessageRejected:
		m.recordRejected(e)
	case events.MessageDropped:
		m.rejected.WithLabelValues(e.Agent, droppedReason(d)).Inc()
	case events.MessageUnsealed:
		m.unsealed.WithLabelValues(e.Agent).Inc()
	}
}

// recordModel counts a model call's event under the model it names, as
// the agent a knows it.
func (m *Metrics) recordModel(e events.Event, a *agent) {
	d := e.Data
	switch e.Type {
	case eventModelUsage:
		// Under the model that answered: the agent's, or a fallback.
		model, priced := a.modelLabel(text(d["model"]))
		m.modelRequests.WithLabelValues(e.Agent, model, "ok").Inc()
		for _, t := range tokenTypes {
			addPositive(m.modelTokens, d[t.key], e.Agent, model, t.label)
		}
		addPositive(m.modelCost, d["cost_usd"], e.Agent, model, priced)
	case eventModelError:
		// Under the model that failed: the agent's, or the one it was
		// switched to (a name outside the config is the agent's).
		model, _ := a.modelLabel(text(d["model"]))
		m.modelRequests.WithLabelValues(e.Agent, model, "error").Inc()
	case eventModelRetry:
		model, _ := a.modelLabel(text(d["model"]))
		m.modelRequests.WithLabelValues(e.Agent, model, oneOf(text(d["outcome"]), []string{"retry", "rate_limited"})).Inc()
	case eventModelFallback:
		m.recordFallback(e.Agent, a, d)
	}
}

// recordWork counts what a turn did besides calling its model: tool
// calls, guardrail trips, watchdog alerts, subagents and schedule runs.
// A run of a schedule a does not configure is counted only as dropped.
func (m *Metrics) recordWork(e events.Event, a *agent) {
	d := e.Data
	switch e.Type {
	case eventToolCall:
		tool := text(d["tool"])
		if !a.tools[tool] {
			tool = other
		}
		m.toolCalls.WithLabelValues(e.Agent, tool, oneOf(text(d["outcome"]), toolOutcomes)).Inc()
	case eventGuardrailTripped:
		m.guardrailTrips.WithLabelValues(e.Agent, oneOf(text(d["guardrail"]), guardrails)).Inc()
	case eventWatchdogAlert:
		m.watchdogAlerts.WithLabelValues(e.Agent, oneOf(text(d["signal"]), watchdogSignals)).Inc()
	case eventSubagentFinished:
		m.subagents.WithLabelValues(e.Agent, oneOf(text(d["outcome"]), subagentOutcomes)).Inc()
	case eventSubagentStarted:
		if run, ok := number(d["run"]); ok && run > 1 {
			m.subagentReruns.WithLabelValues(e.Agent).Inc()
		}
	case eventScheduleRun:
		schedule := text(d["schedule"])
		if !a.schedules[schedule] {
			m.drops.unconfigured.Add(1)
			return
		}
		outcome := oneOf(text(d["outcome"]), scheduleOutcomes)
		m.scheduleRuns.WithLabelValues(e.Agent, schedule, outcome).Inc()
		if due, ok := instant(d["due"]); ok && outcome == "fired" {
			m.scheduleLast.WithLabelValues(e.Agent, schedule).Set(unixSeconds(due))
		}
	}
}

// recordRejected counts a message-rejected event of a configured agent or
// of "_unknown".
//
// A message dropped from the inbox is announced twice when it came over
// JetStream: the driver publishes message-dropped for every drop, and the
// NATS binding then dead-letters it with message-rejected reason
// "dropped". The driver's event is the one that covers every drop (core
// NATS and API messages have no binding behind them), so the binding's is
// not counted again.
func (m *Metrics) recordRejected(e events.Event) {
	reason := oneOf(text(e.Data["reason"]), rejectReasons)
	if reason == "dropped" || reason == operatorDropped || reason == turnCap {
		return // counted from the driver's message-dropped event
	}
	m.rejected.WithLabelValues(e.Agent, reason).Inc()
}

// operatorDropped is the reason of a queued message an operator abandoned
// (inbox.RejectOperatorDropped).
const operatorDropped = "operator_dropped"

// turnCap is the reason of a message whose turn was cut at a per-turn
// limit (inbox.RejectTurnCap).
const turnCap = "turn_cap"

// droppedReason is the reason label of a message-dropped event:
// operator_dropped for a message an operator abandoned, turn_cap for one
// of a turn cut at a per-turn limit, dropped for any other (a full inbox,
// too many failed turns).
func droppedReason(d map[string]any) string {
	if r := text(d["reason"]); r == operatorDropped || r == turnCap {
		return r
	}
	return "dropped"
}

// observeDuration records a turn event's duration_ms, if it has one,
// with the turn's trace id as its exemplar when the turn was traced
// (shown to a scrape that asks for OpenMetrics).
func (m *Metrics) observeDuration(e events.Event) {
	ms, ok := number(e.Data["duration_ms"])
	if !ok || ms < 0 {
		return
	}
	o := m.agentObserver(m.turnDuration, e.Agent)
	if id := text(e.Data["trace_id"]); id != "" {
		if x, ok := o.(prometheus.ExemplarObserver); ok {
			x.ObserveWithExemplar(ms/1000, prometheus.Labels{"trace_id": id})
			return
		}
	}
	o.Observe(ms / 1000)
}

// addPositive adds v to vec's series of labels if it is a positive
// number: a counter must not go down, and a missing field adds nothing —
// nor creates the series (in lazy mode it appears with its first count).
func addPositive(vec *prometheus.CounterVec, v any, labels ...string) {
	if f, ok := number(v); ok && f > 0 {
		vec.WithLabelValues(labels...).Add(f)
	}
}
