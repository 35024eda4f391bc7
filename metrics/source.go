package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Source reports gauges at scrape time (the worker adapts its driver and
// scheduler to it). Gauges is called once per scrape, possibly from
// several scrapes at once, and should not block.
type Source interface {
	Gauges() []AgentGauges
}

// AgentGauges is one agent's gauges at the moment of a scrape. Agents not
// passed to New, and schedules not in their AgentInfo, are not reported;
// when one agent appears twice, the first wins.
type AgentGauges struct {
	Name string
	// State is one of sleeping, running, paused, halted, stopped; any
	// other value reports 0 for all five.
	State            string
	InboxPending     int
	SubagentsRunning int
	// NextSchedule maps schedule name to its next fire; a zero time (no
	// next fire, e.g. a schedule of a stopped agent) has no series.
	NextSchedule map[string]time.Time
}

// gaugeCollector turns a Source into gauges at scrape time.
type gaugeCollector struct {
	agents                               map[string]*agent
	src                                  Source
	pending, state, subagents, nextRunAt *prometheus.Desc
}

func newGaugeCollector(agents map[string]*agent, src Source) *gaugeCollector {
	name := func(n string) string { return prometheus.BuildFQName(namespace, "", n) }
	return &gaugeCollector{
		agents: agents,
		src:    src,
		pending: prometheus.NewDesc(name("inbox_pending"),
			"Messages waiting in the agent's inbox (wake and deferred) for its next turn.", []string{"agent"}, nil),
		state: prometheus.NewDesc(name("agent_state"),
			"The agent's state: 1 for the current one of sleeping, running, paused, halted, stopped; 0 for the others.", []string{"agent", "state"}, nil),
		subagents: prometheus.NewDesc(name("subagents_running"),
			"Background subagents of the agent running now.", []string{"agent"}, nil),
		nextRunAt: prometheus.NewDesc(name("schedule_next_run_timestamp_seconds"),
			"When the schedule fires next, in seconds since the Unix epoch.", []string{"agent", "schedule"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *gaugeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pending
	ch <- c.state
	ch <- c.subagents
	ch <- c.nextRunAt
}

// Collect implements prometheus.Collector.
func (c *gaugeCollector) Collect(ch chan<- prometheus.Metric) {
	if c.src == nil {
		return
	}
	seen := map[string]bool{}
	for _, g := range c.src.Gauges() {
		a := c.agents[g.Name]
		if a == nil || seen[g.Name] {
			continue
		}
		seen[g.Name] = true
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(g.InboxPending), g.Name)
		ch <- prometheus.MustNewConstMetric(c.subagents, prometheus.GaugeValue, float64(g.SubagentsRunning), g.Name)
		for _, s := range agentStates {
			v := 0.0
			if s == g.State {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, v, g.Name, s)
		}
		for s, at := range g.NextSchedule {
			if !a.schedules[s] || at.IsZero() {
				continue
			}
			ch <- prometheus.MustNewConstMetric(c.nextRunAt, prometheus.GaugeValue, unixSeconds(at), g.Name, s)
		}
	}
}
