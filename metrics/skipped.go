package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agent-worker/agent-worker/events"
)

// skipReasons are the reason label values of turns_skipped_total: the
// driver's turn-skipped reasons (driver.SkipNothingToDo); any other value
// is counted as "other".
var skipReasons = []string{"nothing_to_do"}

// skipMetrics count the wakes that ran no turn because the turn would
// have had nothing to do (the driver's turn-skipped events).
type skipMetrics struct {
	skipped *prometheus.CounterVec
}

func newSkipMetrics() skipMetrics {
	return skipMetrics{skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "turns_skipped_total",
		Help: "Wakes that ran no turn and called no model, by reason: nothing_to_do (an operator's bare wake or resume, or a failed turn's retry, with no message, task, instruction, report or approval decision queued)."},
		[]string{"agent", "reason"})}
}

func (sm skipMetrics) precreate(agent string) {
	for _, r := range skipReasons {
		sm.skipped.WithLabelValues(agent, r)
	}
}

// record counts one turn-skipped event of a configured agent.
func (sm skipMetrics) record(e events.Event) {
	sm.skipped.WithLabelValues(e.Agent, oneOf(text(e.Data["reason"]), skipReasons)).Inc()
}
