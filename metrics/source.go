package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Source reports gauges at scrape time (the worker adapts its driver and
// scheduler to it). Gauges is called once per scrape, possibly from
// several scrapes at once, and should not block. A Source that also
// implements DependencySource reports agent_worker_dependency_up.
type Source interface {
	Gauges() []AgentGauges
}

// DependencySource reports the worker's dependencies at scrape time; it
// must not block (the health monitor answers from its last probes).
type DependencySource interface {
	Dependencies() []Dependency
}

// ReplicaSource reports how many replicas (this one included) this
// replica sees live (agent_worker_replicas); it must not block.
type ReplicaSource interface {
	Replicas() int
}

// Dependency is one dependency's state: Name is fixed by the worker
// ("nats", "jetstream_storage", "store").
type Dependency struct {
	Name string
	Up   bool
}

// AgentGauges is one agent's gauges at the moment of a scrape. Agents not
// passed to New, and schedules not in their AgentInfo, are not reported;
// when one agent appears twice, the first wins.
//
// Owner-only gauges: an agent in Standby (another replica owns it) reports
// agent_worker_agent_owned 0 and nothing else — its state, inbox,
// subagents and next schedule runs are the owner's to report — so that a
// sum by agent over all replicas counts each agent once.
type AgentGauges struct {
	Name string
	// Standby: another replica owns the agent (its lease); only
	// agent_worker_agent_owned is reported, as 0.
	Standby bool
	// State is one of sleeping, running, paused, halted, stopped,
	// waiting; any other value reports 0 for all of them.
	State            string
	InboxPending     int
	SubagentsRunning int
	// NextSchedule maps schedule name to its next fire; a zero time (no
	// next fire, e.g. a schedule of a stopped agent) has no series.
	NextSchedule map[string]time.Time
	// MemoryTokens is the estimated size of the agent's running memory
	// (agent_worker_memory_tokens); 0 with memory off or empty.
	MemoryTokens int
	// Spend is the agent's spend and ceilings by window
	// (agent_worker_spend_usd, agent_worker_ceiling_usd); nil without a
	// guard.
	Spend []WindowSpend
}

// WindowSpend is an agent's spend in one window ("turn", "session",
// "day") and its ceiling there (0: none).
type WindowSpend struct {
	Window         string
	Spent, Ceiling float64
}

// gaugeCollector turns a Source into gauges at scrape time.
type gaugeCollector struct {
	agents                               *roster
	src                                  Source
	lazy                                 bool // PerAgentLazy: no zeros
	pending, state, subagents, nextRunAt *prometheus.Desc
	dependencyUp                         *prometheus.Desc
	owned, replicas                      *prometheus.Desc
	memoryTokens                         *prometheus.Desc
	spend, ceiling                       *prometheus.Desc
}

func newGaugeCollector(agents *roster, src Source, lazy bool) *gaugeCollector {
	name := func(n string) string { return prometheus.BuildFQName(namespace, "", n) }
	return &gaugeCollector{
		agents: agents,
		src:    src,
		lazy:   lazy,
		pending: prometheus.NewDesc(name("inbox_pending"),
			"Messages waiting in the agent's inbox (wake and deferred) for its next turn.", []string{"agent"}, nil),
		state: prometheus.NewDesc(name("agent_state"),
			"The agent's state: 1 for the current one of sleeping, running, paused, halted, stopped, waiting (work queued, a dependency down); 0 for the others.", []string{"agent", "state"}, nil),
		dependencyUp: prometheus.NewDesc(name("dependency_up"),
			"1 while the dependency (nats, jetstream_storage, store) answered its last probe, 0 while it is down and turns wait.", []string{"dependency"}, nil),
		subagents: prometheus.NewDesc(name("subagents_running"),
			"Background subagents of the agent running now.", []string{"agent"}, nil),
		nextRunAt: prometheus.NewDesc(name("schedule_next_run_timestamp_seconds"),
			"When the schedule fires next, in seconds since the Unix epoch.", []string{"agent", "schedule"}, nil),
		owned: prometheus.NewDesc(name("agent_owned"),
			"1 while this replica owns the agent (holds its lease) and reports its per-agent gauges, 0 while another replica does; summed by agent over the replicas it is 1.", []string{"agent"}, nil),
		memoryTokens: prometheus.NewDesc(name("memory_tokens"),
			"Estimated size of the agent's running memory in tokens (four characters a token), bounded by memory.max_tokens; 0 with memory off or empty.", []string{"agent"}, nil),
		spend: prometheus.NewDesc(name("spend_usd"),
			"What the agent has spent in USD in the window: turn (the running or last turn), session (since start, kept across restarts), day (today in guardrails.timezone). Lazy per-agent metrics leave out windows with nothing spent.", []string{"agent", "window"}, nil),
		ceiling: prometheus.NewDesc(name("ceiling_usd"),
			"The agent's cost ceiling in USD for the window (turn_usd, session_usd, daily_usd, plus budget added by resets); no series without one. Alert on spend_usd / ceiling_usd, e.g. > 0.8 of today's budget.", []string{"agent", "window"}, nil),
		replicas: prometheus.NewDesc(name("replicas"),
			"Replicas this replica sees live (itself included) through the membership heartbeats; the agents are divided among them.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *gaugeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pending
	ch <- c.state
	ch <- c.subagents
	ch <- c.nextRunAt
	ch <- c.dependencyUp
	ch <- c.owned
	ch <- c.replicas
	ch <- c.memoryTokens
	ch <- c.spend
	ch <- c.ceiling
}

// Collect implements prometheus.Collector.
func (c *gaugeCollector) Collect(ch chan<- prometheus.Metric) {
	if c.src == nil {
		return
	}
	if ds, ok := c.src.(DependencySource); ok {
		for _, d := range ds.Dependencies() {
			v := 0.0
			if d.Up {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.dependencyUp, prometheus.GaugeValue, v, d.Name)
		}
	}
	if rs, ok := c.src.(ReplicaSource); ok {
		ch <- prometheus.MustNewConstMetric(c.replicas, prometheus.GaugeValue, float64(rs.Replicas()))
	}
	seen := map[string]bool{}
	for _, g := range c.src.Gauges() {
		a := c.agents.get(g.Name)
		if a == nil || seen[g.Name] {
			continue
		}
		seen[g.Name] = true
		if g.Standby {
			ch <- prometheus.MustNewConstMetric(c.owned, prometheus.GaugeValue, 0, g.Name)
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.owned, prometheus.GaugeValue, 1, g.Name)
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(g.InboxPending), g.Name)
		// Lazy mode leaves out the zeros: of agent_state all but the
		// current state, and subagents and memory while there are none.
		if !c.lazy || g.SubagentsRunning != 0 {
			ch <- prometheus.MustNewConstMetric(c.subagents, prometheus.GaugeValue, float64(g.SubagentsRunning), g.Name)
		}
		if !c.lazy || g.MemoryTokens != 0 {
			ch <- prometheus.MustNewConstMetric(c.memoryTokens, prometheus.GaugeValue, float64(g.MemoryTokens), g.Name)
		}
		for _, s := range agentStates {
			v := 0.0
			if s == g.State {
				v = 1
			} else if c.lazy {
				continue
			}
			ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, v, g.Name, s)
		}
		for _, w := range g.Spend {
			if c.lazy && w.Spent == 0 {
				continue
			}
			ch <- prometheus.MustNewConstMetric(c.spend, prometheus.GaugeValue, w.Spent, g.Name, w.Window)
			if w.Ceiling > 0 {
				ch <- prometheus.MustNewConstMetric(c.ceiling, prometheus.GaugeValue, w.Ceiling, g.Name, w.Window)
			}
		}
		for s, at := range g.NextSchedule {
			if !a.schedules[s] || at.IsZero() {
				continue
			}
			ch <- prometheus.MustNewConstMetric(c.nextRunAt, prometheus.GaugeValue, unixSeconds(at), g.Name, s)
		}
	}
}
