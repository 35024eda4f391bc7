package metrics

import (
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

const namespace = "agent_worker"

// AgentInfo is what is known about an agent at start, so its series exist
// from the first scrape (counters at 0). It is also the bound on label
// values: events for agents, tools or schedules not listed here do not
// create series.
type AgentInfo struct {
	Name string
	// Model is the model name pricing looks up; it is the model label of
	// every model_* series of the agent, whatever name an event carries.
	// Empty is reported as "unknown".
	Model string
	// Priced is the priced label of model_cost_usd_total: false means the
	// model has no price, costs $0 and no cost ceiling binds.
	Priced bool
	// Fallbacks are the agent's fallback models in the order they are
	// tried (see FallbackInfo); their names become model labels of the
	// agent's model_* series and of model_fallbacks_total.
	Fallbacks []FallbackInfo
	// Alternates are the models an operator may switch the agent to (every
	// configured model, see addAlternates); their names become model
	// labels of the agent's model_* series with their first event.
	Alternates []FallbackInfo
	// Tools are the tool names from config; calls to any other tool are
	// counted as tool="other".
	Tools []string
	// Schedules are the schedule names from config; runs of any other
	// schedule are not counted (see agent_worker_events_dropped_total).
	Schedules []string
}

// agent is an AgentInfo prepared for lookups while counting events. It is
// not modified after New.
type agent struct {
	model     string
	priced    string
	chain     []string          // model, then its fallbacks in order
	models    map[string]string // model name → priced label: model's and its fallbacks'
	tools     map[string]bool
	schedules map[string]bool
}

// Metrics is the registry and every agent_worker_* metric of one worker.
// All methods are safe for concurrent use.
type Metrics struct {
	reg     *prometheus.Registry
	handler http.Handler
	// lazy: per-agent series appear with their first event (mode.go).
	lazy bool
	// agents are the configured agents; a config reload replaces them
	// (reload.go).
	agents roster
	drops  *dropCollector

	turns          *prometheus.CounterVec
	turnDuration   *prometheus.HistogramVec
	wakes          *prometheus.CounterVec
	wakeLatency    *prometheus.HistogramVec
	received       *prometheus.CounterVec
	redelivered    *prometheus.CounterVec
	rejected       *prometheus.CounterVec
	unsealed       *prometheus.CounterVec
	retries        *prometheus.CounterVec
	resumed        *prometheus.CounterVec
	approvals      *prometheus.CounterVec
	abandoned      *prometheus.CounterVec
	throttled      *prometheus.CounterVec
	wakesDropped   *prometheus.CounterVec
	modelRequests  *prometheus.CounterVec
	modelTokens    *prometheus.CounterVec
	modelCost      *prometheus.CounterVec
	modelFallbacks *prometheus.CounterVec
	toolCalls      *prometheus.CounterVec
	guardrailTrips *prometheus.CounterVec
	watchdogAlerts *prometheus.CounterVec
	subagents      *prometheus.CounterVec
	subagentReruns *prometheus.CounterVec
	scheduleRuns   *prometheus.CounterVec
	scheduleLast   *prometheus.GaugeVec

	httpRequests    *prometheus.CounterVec
	httpDuration    *prometheus.HistogramVec
	authFailures    *prometheus.CounterVec // auth.go
	amNotifications *prometheus.CounterVec
	ownership       *prometheus.CounterVec
	memory          memoryMetrics    // memory.go
	skipped         eventCounter     // skipped.go
	asks            eventCounter     // asks.go
	input           *inputMetrics    // input.go
	webhooks        *webhookMetrics  // webhooks.go
	store           *storeMetrics    // store.go
	lease           *leaseMetrics    // lease.go
	exposure        *exposureMetrics // exposure.go
	// routes bounds the route label (SetHTTPRoutes); nil until set.
	routes atomic.Pointer[map[string]bool]
	config *configMetrics // reload.go
}

// Histogram buckets, in seconds. A turn is one or more model calls with
// tools in between: from a fraction of a second (a cached, one-line reply)
// to the ten-minute range of a long tool loop. Wake latency is
// in-process scheduling plus, at worst, a slow store: milliseconds
// normally, up to a minute when something is wrong.
var (
	turnBuckets        = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600}
	wakeLatencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	// An API request is a lookup or a publish awaiting JetStream's ack:
	// milliseconds; seconds only when NATS or the store is slow. Event
	// streams last as long as the client stays (+Inf).
	httpBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
)

// New returns the metrics of a worker running agents, on a registry of
// their own that also holds the Go runtime and process collectors. In
// full mode every counter series of the fixed label sets is created at 0
// for each agent (and for agent "_unknown" in messages_rejected_total);
// in lazy mode only _unknown's are, and an agent's series appear with
// their first event (PerAgent). src reports the gauges at scrape time;
// with a nil src those gauges have no series. Duplicate agent names are
// merged, the first one's Model and Priced win. New runs in PerAgentAuto
// mode: full up to AutoFullMaxAgents agents, lazy above.
func New(agents []AgentInfo, src Source) *Metrics {
	return NewWith(agents, src, Options{})
}

// agentsOf indexes the agents' infos by name; a name given twice is
// merged, the first one's Model and Priced win.
func agentsOf(infos []AgentInfo) map[string]*agent {
	out := make(map[string]*agent, len(infos))
	for _, info := range infos {
		a := out[info.Name]
		if a == nil {
			a = &agent{model: info.Model, priced: "false", tools: map[string]bool{}, schedules: map[string]bool{}}
			if a.model == "" {
				a.model = "unknown"
			}
			if info.Priced {
				a.priced = "true"
			}
			a.chain, a.models = []string{a.model}, map[string]string{a.model: a.priced}
			a.addFallbacks(info.Fallbacks)
			a.addAlternates(info.Alternates)
			out[info.Name] = a
		}
		for _, t := range info.Tools {
			a.tools[t] = true
		}
		for _, s := range info.Schedules {
			a.schedules[s] = true
		}
	}
	return out
}

// NewWith is New with opts.
func NewWith(agents []AgentInfo, src Source, opts Options) *Metrics {
	m := &Metrics{
		reg:   prometheus.NewRegistry(),
		drops: newDropCollector(),
	}
	byName := agentsOf(agents)
	m.agents.set(byName)

	m.lazy = opts.PerAgent.resolve(len(byName)) == PerAgentLazy

	m.newTurnMetrics()
	m.newModelMetrics()
	m.newAPIMetrics()
	m.register(src)
	m.precreate()
	m.handler = newHandler(m.reg)
	return m
}

// counter is a counter vector of the worker's namespace.
func counter(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
}

// newTurnMetrics makes the series of turns, wakes and messages.
func (m *Metrics) newTurnMetrics() {
	m.turns = counter("turns_total",
		"Turns that ended, by outcome: completed, or why it failed (failed, timeout, interrupted, halted, shutdown, capped, unavailable: a dependency was down; abandoned: the agent's lease moved while it ran, and nothing of it was recorded).",
		"agent", "outcome")
	m.turnDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "turn_duration_seconds",
		Help:    "Wall-clock duration of turns, completed or failed, from start to end.",
		Buckets: turnBuckets}, agentLabels(m.lazy))
	m.wakes = counter("wakes_total",
		"Wake requests, by what asked for the turn (several may coalesce into one turn).",
		"agent", "source")
	m.wakeLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "wake_latency_seconds",
		Help:    "Time from the oldest cause of a turn (message received, timer or tick due) to the turn's start.",
		Buckets: wakeLatencyBuckets}, agentLabels(m.lazy))
	m.received = counter("messages_received_total",
		"Messages queued in an agent's inbox, by kind: inbox (wakes the agent) or deferred (waits for the next turn).",
		"agent", "kind")
	m.redelivered = counter("messages_redelivered_total",
		"Messages read again from the input log by a new owner (after a restart, a failover or a handover): the log held them before this owner restored the agent, and no recorded turn had handled them. Not in messages_received_total.",
		"agent", "kind")
	m.retries = counter("turn_retries_total",
		"Failed turns retried by themselves after a backoff, by reason: failure (the turn failed; counts against its messages) or outage (the store, NATS or the model provider was down; counts against nothing).",
		"agent", "reason")
	m.resumed = counter("turns_resumed_total",
		"Turns that resumed an unfinished turn from its journal (a crash, a lost lease, an outage, a failure cut it short): recorded model responses and tool results replayed instead of asked or run again.",
		"agent")
	m.approvals = counter("approvals_total",
		"Tool calls held for an operator's approval (outcome requested), and what became of them: approved (then run), denied, expired (not decided within approval_ttl; not run).",
		"agent", "outcome")
	m.abandoned = counter("turn_journals_abandoned_total",
		"Unfinished turn journals given up, by reason: interrupted, halted, timeout, capped (the turn was ended on purpose), expired (older than turn.resume_within), inputs_missing (its messages did not come back in time), too_large (above 768 KiB; journaling stopped for that turn). Their messages run in an ordinary turn.",
		"agent", "reason")
	m.throttled = counter("turns_throttled_total",
		"Turns held back by a turn limit, by reason: max_per_wake (back-to-back turns) or turns_per_hour.",
		"agent", "reason")
	m.wakesDropped = counter("wakes_dropped_total",
		"Tasks (a schedule's prompt, an operator's message, a timer) given up after failing too many turns, by the source of the wake.",
		"agent", "source")
	m.rejected = counter("messages_rejected_total",
		"Input refused or given up on, by reason: bad bodies and unknown agents (agent \"_unknown\") go to the dead-letter subject; dropped are messages dropped from a full inbox or after failing turns; operator_dropped are queued messages an operator abandoned (resume with drop_queued), dead-lettered; turn_cap are messages of a turn cut at a per-turn limit (not retried, so not charged twice), dead-lettered.",
		"agent", "reason")
	m.unsealed = counter("messages_unsealed_total",
		"Messages that claimed to come through the worker (an Alertmanager notification, a subagent's report: the Agent-Worker-Via header; a sender the API authenticated: the Agent-Worker-Sender header) without the deployment's seal. The claim is ignored and the message delivered as an ordinary external message; anything above 0 is a publisher forging the header, or a replica of a version before seals.",
		"agent")
}

// newModelMetrics makes the series of what turns do: model and tool
// calls, guardrails, the watchdog, subagents and schedules.
func (m *Metrics) newModelMetrics() {
	m.modelRequests = counter("model_requests_total",
		"Model calls, by outcome: ok (a response with usage), error (the call failed for good: the turn fails or falls back), retry (a failed attempt that was retried) or rate_limited (a 429 that was retried after Retry-After). The model label is the configured model name.",
		"agent", "model", "outcome")
	m.modelTokens = counter("model_tokens_total",
		"Tokens reported by the model, by type: input (all prompt tokens, cached ones included), cached_input, cache_write, output.",
		"agent", "model", "type")
	m.modelCost = counter("model_cost_usd_total",
		"Spend in US dollars as priced by the worker's pricing table; priced=\"false\" marks a model without a price, whose calls cost 0 and are bound by no cost ceiling.",
		"agent", "model", "priced")
	m.modelFallbacks = newFallbacks()
	m.toolCalls = counter("tool_calls_total",
		"Tool calls that finished, by outcome (ok or error); tools not in the agent's config are counted as tool=\"other\".",
		"agent", "tool", "outcome")
	m.guardrailTrips = counter("guardrail_trips_total",
		"Guardrails tripped, halting the agent: turn_usd, session_usd, daily_usd, worker_daily_usd, watchdog.",
		"agent", "guardrail")
	m.watchdogAlerts = counter("watchdog_alerts_total",
		"Loop patterns the watchdog reported, by signal: repeat, cycle, dominant, failures.",
		"agent", "signal")
	m.subagents = counter("subagents_total",
		"Subagents that finished, by outcome: completed, failed, stopped, timeout.",
		"agent", "outcome")
	m.subagentReruns = counter("subagent_reruns_total",
		"Subagent jobs started again (run 2 and later) because the replica running them died or stopped before they finished.",
		"agent")
	m.scheduleRuns = counter("schedule_runs_total",
		"Cron ticks of configured schedules, by outcome: fired, missed (not backfilled), skipped_overlap, skipped_paused, skipped_halted.",
		"agent", "schedule", "outcome")
	m.scheduleLast = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "schedule_last_run_timestamp_seconds",
		Help: "When the schedule's last fired tick was due, in seconds since the Unix epoch (no series until it first fires)."},
		[]string{"agent", "schedule"})
}

// newAPIMetrics makes the series of the operator API and of ownership.
func (m *Metrics) newAPIMetrics() {
	m.httpRequests = counter("http_requests_total",
		"Operator API requests answered, by route pattern (\"POST /v1/alertmanager/{name}\"; \"other\" for a path no route matched) and status code.",
		"route", "code")
	m.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "http_request_duration_seconds",
		Help:    "Time to answer operator API requests, by route pattern; an event stream counts until it ends.",
		Buckets: httpBuckets}, []string{"route"})
	m.authFailures = newAuthFailures()
	m.amNotifications = counter("alertmanager_notifications_total",
		"Requests to the Alertmanager receiver for a configured agent, by outcome: accepted (queued, 202), duplicate (already queued or handled, 200), rejected (a 4xx answer: bad or too large payload, unauthorized, forbidden), truncated (accepted with alerts left out to fit one message; also counted as accepted).",
		"agent", "outcome")
	m.ownership = counter("ownership_changes_total",
		"Times this replica gained or gave up an agent, by reason: acquired (took its lease), released (let it go as it stopped), lost (another replica holds the lease, or it could not be renewed in time; a running turn was cancelled), handed_over (the agent is placed on another replica; its running turn finished first).",
		"agent", "reason")
}

// register makes the metrics kept beside Metrics' own (memory, skipped
// turns, asks, input, webhooks, store, config) and registers them, the
// collectors reporting src and Metrics' own series.
func (m *Metrics) register(src Source) {
	m.memory = newMemoryMetrics()
	m.reg.MustRegister(m.memory.collectors()...)
	m.skipped = newSkipMetrics()
	m.reg.MustRegister(m.skipped.vec)
	m.asks = newAskMetrics()
	m.reg.MustRegister(m.asks.vec)
	m.input = newInputMetrics()
	m.reg.MustRegister(m.input.collectors()...)
	m.webhooks = newWebhookMetrics()
	m.reg.MustRegister(m.webhooks.notifications)
	m.store = newStoreMetrics()
	m.reg.MustRegister(m.store.ops)
	m.lease = newLeaseMetrics()
	m.reg.MustRegister(m.lease.collectors()...)
	m.exposure = newExposureMetrics()
	m.reg.MustRegister(m.exposure.collectors()...)
	m.config = newConfigMetrics(m.reg)
	m.reg.MustRegister(newLedgerMetrics(src))
	m.reg.MustRegister(newMCPMetrics(src))
	m.reg.MustRegister(newDeadLetterMetrics(src))
	m.reg.MustRegister(newReadAheadMetrics(src))
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.turns, m.turnDuration, m.wakes, m.wakeLatency, m.received, m.redelivered, m.rejected, m.unsealed,
		m.retries, m.resumed, m.abandoned, m.approvals, m.throttled, m.wakesDropped,
		m.modelRequests, m.modelTokens, m.modelCost, m.modelFallbacks, m.toolCalls,
		m.guardrailTrips, m.watchdogAlerts, m.subagents, m.subagentReruns, m.scheduleRuns, m.scheduleLast,
		m.httpRequests, m.httpDuration, m.authFailures, m.amNotifications, m.ownership,
		newGaugeCollector(&m.agents, src, m.lazy),
		m.drops,
	)
}

// newHandler is the scrape handler of reg.
func newHandler(reg *prometheus.Registry) http.Handler {
	// HandlerOpts.Registry adds promhttp_metric_handler_errors_total to
	// the registry, and InstrumentMetricHandler the scrape counters, so a
	// failing scrape is itself visible. Built once: registering twice
	// would panic.
	return promhttp.InstrumentMetricHandler(reg, promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		Registry:      reg,
		ErrorHandling: promhttp.ContinueOnError,
		// A scrape that asks for OpenMetrics (Prometheus with exemplar
		// storage) gets turn_duration_seconds' exemplars: the trace id
		// of a traced turn.
		EnableOpenMetrics: true,
	}))
}

// precreate makes every series of the fixed label sets exist at 0, so
// rate() and absent-or-zero alerts work from the first scrape; in lazy
// mode only the worker's own (the histograms, "_unknown"'s rejections).
func (m *Metrics) precreate() {
	agents := m.agents.all()
	if m.lazy {
		m.turnDuration.WithLabelValues()
		m.wakeLatency.WithLabelValues()
		agents = nil
	}
	for name, a := range agents {
		m.precreateAgent(name, a)
	}
	for _, r := range rejectReasons {
		m.rejected.WithLabelValues(unknownAgent, r)
	}
}

// precreateAgent makes the agent's series of the fixed label sets exist
// at 0 (full mode).
func (m *Metrics) precreateAgent(name string, a *agent) {
	for _, o := range turnOutcomes {
		m.turns.WithLabelValues(name, o)
	}
	m.turnDuration.WithLabelValues(name)
	for _, s := range wakeSources {
		m.wakes.WithLabelValues(name, s)
	}
	m.wakeLatency.WithLabelValues(name)
	for _, k := range messageKinds {
		m.received.WithLabelValues(name, k)
		m.redelivered.WithLabelValues(name, k)
	}
	for _, r := range retryReasons {
		m.retries.WithLabelValues(name, r)
	}
	m.resumed.WithLabelValues(name)
	for _, o := range approvalOutcomes {
		m.approvals.WithLabelValues(name, o)
	}
	for _, r := range journalReasons {
		m.abandoned.WithLabelValues(name, r)
	}
	for _, r := range throttleReasons {
		m.throttled.WithLabelValues(name, r)
	}
	for _, s := range wakeSources {
		m.wakesDropped.WithLabelValues(name, s)
	}
	for _, r := range rejectReasons {
		m.rejected.WithLabelValues(name, r)
	}
	m.unsealed.WithLabelValues(name)
	for _, o := range modelOutcomes {
		m.modelRequests.WithLabelValues(name, a.model, o)
	}
	for _, t := range tokenTypes {
		m.modelTokens.WithLabelValues(name, a.model, t.label)
	}
	m.modelCost.WithLabelValues(name, a.model, a.priced)
	m.precreateFallbacks(name, a)
	for t := range a.tools {
		for _, o := range toolOutcomes {
			m.toolCalls.WithLabelValues(name, t, o)
		}
	}
	for _, g := range guardrails {
		m.guardrailTrips.WithLabelValues(name, g)
	}
	for _, s := range watchdogSignals {
		m.watchdogAlerts.WithLabelValues(name, s)
	}
	for _, o := range subagentOutcomes {
		m.subagents.WithLabelValues(name, o)
	}
	m.subagentReruns.WithLabelValues(name)
	for s := range a.schedules {
		for _, o := range scheduleOutcomes {
			m.scheduleRuns.WithLabelValues(name, s, o)
		}
	}
	for _, o := range alertmanagerOutcomes {
		m.amNotifications.WithLabelValues(name, o)
	}
	for _, r := range ownershipReasons {
		m.ownership.WithLabelValues(name, r)
	}
	m.memory.precreate(name)
	m.skipped.precreate(name)
	m.asks.precreate(name)
}

// Registry returns the registry every metric is registered on. Callers may
// register collectors of their own on it.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition formats. A
// collector that fails does not fail the scrape: the rest is served and
// the failure is counted in promhttp_metric_handler_errors_total.
func (m *Metrics) Handler() http.Handler { return m.handler }
