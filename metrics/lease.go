package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// letGoReasons are why a replica lets every agent go at once
// (lease.Options.OnLetGo): its renewal came too late, its record was gone,
// or another holder wrote it. The reason label of
// agent_worker_lease_let_go_total.
var letGoReasons = []string{"late_renewal", "record_gone", "holder_conflict"}

// renewBuckets: a renewal is one compare-and-set of this replica's
// record: a millisecond or so normally; seconds when the process is
// starved or the store is slow; past the lease's TTL - RenewEvery (10 s
// at the default 15 s) every agent is let go.
var renewBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// leaseMetrics are the lease renewals and let-gos of this replica.
type leaseMetrics struct {
	renew *prometheus.HistogramVec
	letGo *prometheus.CounterVec
}

func newLeaseMetrics() *leaseMetrics {
	l := &leaseMetrics{
		renew: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "lease_renew_seconds",
			Help: "Time each renewal of this replica's lease record took (one write on a connection of its own), by outcome: ok or error. " +
				"A renewal slower than the lease's ttl minus its renew interval lets every agent go.",
			Buckets: renewBuckets}, []string{"outcome"}),
		letGo: counter("lease_let_go_total",
			"Times this replica let every agent go at once, by reason: late_renewal (its record was not renewed within the lease's ttl minus its renew interval: the store out of reach, or the process frozen or starved), record_gone, holder_conflict (another replica writes its record: a shared lease.holder). Agents nobody took meanwhile are taken back at once, unchanged.",
			"reason"),
	}
	for _, r := range letGoReasons {
		l.letGo.WithLabelValues(r)
	}
	for _, o := range []string{"ok", "error"} {
		l.renew.WithLabelValues(o)
	}
	return l
}

func (l *leaseMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{l.renew, l.letGo}
}

// LeaseRenewed observes one renewal of this replica's lease record
// (lease.Options.OnRenewed).
func (m *Metrics) LeaseRenewed(took time.Duration, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.lease.renew.WithLabelValues(outcome).Observe(took.Seconds())
}

// LeaseLetGo counts one let-go of every agent (lease.Options.OnLetGo); a
// reason it does not know is not counted.
func (m *Metrics) LeaseLetGo(why string, _ int) {
	if oneOf(why, letGoReasons) == other {
		return
	}
	m.lease.letGo.WithLabelValues(why).Inc()
}
