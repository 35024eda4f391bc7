package driver

// State is an agent's place in its life cycle.
type State string

// Agent states.
const (
	Sleeping State = "sleeping"
	Running  State = "running"
	Paused   State = "paused"
	Halted   State = "halted"
	Stopped  State = "stopped"
	// Waiting: work is queued but a dependency (the store, NATS) is down,
	// so no turn starts; it resumes by itself when the dependency is back.
	Waiting State = "waiting"
)

// States lists every state, for metrics that export one series per state.
var States = []State{Sleeping, Running, Paused, Halted, Stopped, Waiting}

// State returns the agent's current state.
func (a *Agent) State() State {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stateLocked()
}

func (a *Agent) stateLocked() State {
	switch {
	case a.stopped:
		return Stopped
	case a.running:
		return Running
	case a.gate.halt != "":
		return Halted
	case a.gate.paused:
		return Paused
	case a.waiting != "":
		return Waiting
	}
	return Sleeping
}

// Running reports whether a turn is running (scheduler.Target).
func (a *Agent) Running() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.running
}
