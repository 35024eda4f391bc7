package config

// Metrics configures what /metrics exposes per agent.
type Metrics struct {
	// PerAgent is "auto" (default), "full" or "lazy": full creates every
	// per-agent counter series at 0 from the first scrape and keeps the
	// turn-duration and wake-latency histograms per agent (about 140
	// series an agent); lazy creates a per-agent series with its first
	// event and keeps those histograms per worker (about five series an
	// idle agent); auto is full up to MetricsAutoFullMaxAgents agents and
	// lazy above (metrics.PerAgentAuto).
	PerAgent string `yaml:"per_agent"`
}

// MetricsAutoFullMaxAgents is the number of agents up to which
// metrics.per_agent "auto" is "full" (metrics.AutoFullMaxAgents).
const MetricsAutoFullMaxAgents = 100

// metricsPerAgent are the values of metrics.per_agent
// (metrics.PerAgentModes).
var metricsPerAgent = []string{"auto", "full", "lazy"}

// metrics checks the metrics: section.
func (v *validator) metrics(c *Config) {
	v.oneOf(path{"metrics", "per_agent"}, c.Metrics.PerAgent, metricsPerAgent)
}
