package metrics

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Reload outcomes counted by agent_worker_config_reloads_total; any other
// value is counted as "other".
var reloadOutcomes = []string{"applied", "unchanged", "refused", "failed"}

// configMetrics are the config reload's: how reloads ended, and which
// config is in force (its content hash: one series, the previous one
// deleted when it changes).
type configMetrics struct {
	reloads *prometheus.CounterVec
	info    *prometheus.GaugeVec

	mu   sync.Mutex
	hash string
}

func newConfigMetrics(reg prometheus.Registerer) *configMetrics {
	c := &configMetrics{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "config_reloads_total",
			Help: "Config reloads (SIGHUP, POST /v1/reload), by outcome: applied, unchanged (token values re-read), refused (invalid, or a key that needs a restart: nothing changed), failed (partly applied)."},
			[]string{"outcome"}),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "config_info",
			Help: "1 for the content hash of the config in force (after defaults and ${ENV}); replicas with different hashes run different configs."},
			[]string{"hash"}),
	}
	for _, o := range append(reloadOutcomes, other) {
		c.reloads.WithLabelValues(o)
	}
	reg.MustRegister(c.reloads, c.info)
	return c
}

// ConfigReload counts a reload that ended with outcome.
func (m *Metrics) ConfigReload(outcome string) {
	m.config.reloads.WithLabelValues(oneOf(outcome, reloadOutcomes)).Inc()
}

// SetConfigHash sets agent_worker_config_info to 1 for hash, deleting the
// series of the hash before.
func (m *Metrics) SetConfigHash(hash string) {
	c := m.config
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hash != "" && c.hash != hash {
		c.info.DeleteLabelValues(c.hash)
	}
	c.hash = hash
	c.info.WithLabelValues(hash).Set(1)
}

// roster is the configured agents, by name: replaced whole (copy on
// write) when a reload changes them, so every reader sees one set or the
// next. Entries are never modified once stored.
type roster struct {
	p atomic.Pointer[map[string]*agent]
}

func (r *roster) set(m map[string]*agent) { r.p.Store(&m) }

// get returns the named agent, or nil for an agent not configured.
func (r *roster) get(name string) *agent {
	if m := r.p.Load(); m != nil {
		return (*m)[name]
	}
	return nil
}

// all returns the agents; callers must not modify the map.
func (r *roster) all() map[string]*agent {
	if m := r.p.Load(); m != nil {
		return *m
	}
	return nil
}

// SetAgents replaces the configured agents after a config reload: the
// label values of an added agent, or of a changed one's new model,
// tools and schedules, are accepted from now on (and their series made
// at 0 in full mode); a removed agent's events are counted as
// unconfigured from now on, and its series keep their last values until
// the process restarts.
func (m *Metrics) SetAgents(infos []AgentInfo) {
	next := agentsOf(infos)
	if !m.lazy {
		for name, a := range next {
			m.precreateAgent(name, a)
		}
	}
	m.agents.set(next)
}
