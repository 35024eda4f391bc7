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
// How many per-agent series exist is a choice (Options.PerAgent, the
// config's metrics.per_agent): full creates them all at 0 for alerts
// that need a series before the first event; lazy creates each with its
// first event and keeps the histograms per worker, for thousands of
// agents (mode.go, BenchmarkScrape).
//
// There is no global state: each Metrics has its own registry, so tests
// and several workers in one process do not share counters.
package metrics
