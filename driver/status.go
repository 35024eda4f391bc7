package driver

import "time"

// Status is a snapshot of one agent for operators.
type Status struct {
	Name  string `json:"name"`
	State State  `json:"state"`
	// HaltReason says why a halted agent is halted.
	HaltReason string `json:"halt_reason,omitempty"`
	Paused     bool   `json:"paused"`
	// Standby: another replica holds the agent's lease and runs it.
	Standby bool `json:"standby,omitempty"`
	// NextWake is when the armed timer fires (nil: none) and NextWakeCause
	// what it is ("timer", "heartbeat").
	NextWake      *time.Time   `json:"next_wake,omitempty"`
	NextWakeCause string       `json:"next_wake_cause,omitempty"`
	InboxPending  int          `json:"inbox_pending"`
	Deferred      int          `json:"deferred_pending"`
	InboxCap      int          `json:"inbox_cap"`
	PendingWakes  int          `json:"pending_wakes"`
	Turns         uint64       `json:"turns"`
	LastTurn      *TurnSummary `json:"last_turn,omitempty"`
}

// Status returns a snapshot of the agent.
func (a *Agent) Status() Status {
	w, d := a.inbox.Len()
	at, heartbeat, timerOK := a.sched.NextTimer(a.spec.Name)
	a.mu.Lock()
	defer a.mu.Unlock()
	s := Status{
		Name:         a.spec.Name,
		State:        a.stateLocked(),
		HaltReason:   a.halt,
		Paused:       a.paused,
		Standby:      a.standby,
		InboxPending: w,
		Deferred:     d,
		InboxCap:     a.inbox.Cap(),
		PendingWakes: len(a.causes),
		Turns:        a.turns,
	}
	if timerOK {
		s.NextWake = &at
		s.NextWakeCause = string(SourceTimer)
		if heartbeat {
			s.NextWakeCause = string(SourceHeartbeat)
		}
	}
	if a.last != nil {
		l := *a.last
		s.LastTurn = &l
	}
	return s
}

// Schedules returns the names of the agent's configured schedules.
func (a *Agent) Schedules() []string {
	out := make([]string, 0, len(a.spec.Schedules))
	for _, s := range a.spec.Schedules {
		out = append(out, s.Name)
	}
	return out
}

// ModelName returns the name of the agent's model (what pricing looks up).
func (a *Agent) ModelName() string { return a.spec.Model.Name() }
