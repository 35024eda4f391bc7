package metrics

import "github.com/prometheus/client_golang/prometheus"

// exposureMetrics say whether this replica's NATS lets a client without
// credentials at what only the worker may touch (natsbus.ProbeAnonymous).
type exposureMetrics struct {
	exposed prometheus.Gauge
}

func newExposureMetrics() *exposureMetrics {
	return &exposureMetrics{exposed: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "state_exposed",
		Help: "1 when a NATS client without credentials could read this worker's state, its control requests or its own replies (checked at start: the ERROR log line and /readyz's degraded say what); 0 when it could not. " +
			"Deny other clients $JS.API.>, $KV.>, the control subjects and _AW_INBOX.> (docs: operations, NATS as a trust boundary)."})}
}

func (e *exposureMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{e.exposed}
}

// StateExposed sets agent_worker_state_exposed: whether a client
// without credentials could reach what only the worker may.
func (m *Metrics) StateExposed(exposed bool) {
	v := 0.0
	if exposed {
		v = 1
	}
	m.exposure.exposed.Set(v)
}
