package metrics

import (
	"sync"

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
