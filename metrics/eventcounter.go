package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agent-worker/agent-worker/events"
)

// eventCounter counts one type of a configured agent's events by one
// label (besides agent) whose values are a fixed set: the event's data
// under key, a value outside the set counted as "other". In full mode
// every value's series exists at 0 for every agent (precreate).
type eventCounter struct {
	vec    *prometheus.CounterVec
	key    string
	values []string
}

// newEventCounter is the counter agent_worker_<name>{agent,<label>},
// whose label is read from the event's data under label and takes
// values.
func newEventCounter(name, help, label string, values []string) eventCounter {
	return eventCounter{vec: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help},
		[]string{"agent", label}), key: label, values: values}
}

func (c eventCounter) precreate(agent string) {
	for _, v := range c.values {
		c.vec.WithLabelValues(agent, v)
	}
}

// record counts one event of a configured agent.
func (c eventCounter) record(e events.Event) {
	c.vec.WithLabelValues(e.Agent, oneOf(text(e.Data[c.key]), c.values)).Inc()
}
