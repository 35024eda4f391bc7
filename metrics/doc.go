// Package metrics owns the worker's Prometheus registry and every
// agent_worker_* metric: it counts what the in-process event bus reports
// (turns, wakes, messages, model calls, tools, guardrails, watchdog,
// schedules), counts what the operator API reports through its Observer
// (requests by route and code, Alertmanager notifications by outcome), and
// asks a Source for gauges at scrape time. It reads events and never
// drives an agent.
//
// Label values are bounded by the configuration, never by model output or
// message content: agents, models, tools and schedules come from the
// AgentInfo handed to New, and every other label takes its value from a
// fixed set, with anything outside it counted as "other" (or, for an
// unconfigured agent or schedule, not counted at all but tallied in
// agent_worker_events_dropped_total). A model that names a tool of its
// own invention therefore cannot create a series.
//
// There is no global state: each Metrics has its own registry, so tests
// and several workers in one process do not share counters.
package metrics
