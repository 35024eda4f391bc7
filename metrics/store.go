package metrics

import "github.com/prometheus/client_golang/prometheus"

// storeMetrics count the state store's operations (round trips).
type storeMetrics struct {
	ops *prometheus.CounterVec
}

func newStoreMetrics() *storeMetrics {
	return &storeMetrics{
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "store_operations_total",
			Help: "Operations on the state store (each a round trip to NATS KV or Redis), by op (get, put, create, update, delete, append, tail, claim) and outcome: ok, refused (not found, exists, revision conflict, a moved fence: a normal answer), error (the store failed or the caller gave up)."},
			[]string{"op", "outcome"}),
	}
}

// StoreOperation counts one store operation (store.Observed's observer):
// op is its name, outcome store.Outcome of its error.
func (m *Metrics) StoreOperation(op, outcome string) {
	m.store.ops.WithLabelValues(op, outcome).Inc()
}
