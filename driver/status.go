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
	// Owner is the lease holder name of the replica that owns the agent
	// as this replica last saw it ("" unknown, or not leased).
	Owner string `json:"owner,omitempty"`
	// NextWake is when the agent wakes by itself next (nil: only a
	// message or an operator wakes it), NextWakeCause what wakes it then
	// ("timer", "heartbeat", "retry") and NextWakeReason why, in words.
	NextWake       *time.Time `json:"next_wake,omitempty"`
	NextWakeCause  string     `json:"next_wake_cause,omitempty"`
	NextWakeReason string     `json:"next_wake_reason,omitempty"`
	// WaitingFor says why queued work waits (state waiting): a dependency
	// that is down.
	WaitingFor string `json:"waiting_for,omitempty"`
	// FailedTurns counts failed turns in a row (0 after a completed one).
	FailedTurns int `json:"failed_turns,omitempty"`
	// ThrottledUntil is set while a turn limit holds the next turn back,
	// ThrottledBy names it ("turns_per_hour", "max_per_wake").
	ThrottledUntil *time.Time `json:"throttled_until,omitempty"`
	ThrottledBy    string     `json:"throttled_by,omitempty"`
	// TurnsPerHour is the agent's turn limit (0: none).
	TurnsPerHour int `json:"turns_per_hour,omitempty"`
	InboxPending int `json:"inbox_pending"`
	Deferred     int `json:"deferred_pending"`
	InboxCap     int `json:"inbox_cap"`
	// LogWaiting counts the agent's messages its log still holds beyond
	// what its inbox has read (the inbox is at its cap), as of the last
	// read: they come in later turns, oldest first.
	LogWaiting   int          `json:"log_waiting,omitempty"`
	PendingWakes int          `json:"pending_wakes"`
	Turns        uint64       `json:"turns"`
	LastTurn     *TurnSummary `json:"last_turn,omitempty"`
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
		HaltReason:   a.gate.halt,
		Paused:       a.gate.paused,
		Standby:      a.gate.standby,
		Owner:        a.owner,
		InboxPending: w,
		Deferred:     d,
		InboxCap:     a.inbox.Cap(),
		LogWaiting:   a.lg.waiting,
		PendingWakes: len(a.causes),
		Turns:        a.turns,
		WaitingFor:   a.waiting,
		FailedTurns:  a.failures,
		TurnsPerHour: a.spec.TurnsPerHour,
	}
	if timerOK {
		s.NextWake = &at
		s.NextWakeCause, s.NextWakeReason = string(SourceTimer), "the wake the model asked for"
		if heartbeat {
			s.NextWakeCause, s.NextWakeReason = string(SourceHeartbeat), "heartbeat (sleep.default)"
		}
	}
	if r := a.retryAt; !r.IsZero() && (s.NextWake == nil || r.Before(*s.NextWake)) {
		s.NextWake, s.NextWakeCause, s.NextWakeReason = &r, string(SourceRetry), "retry after failure"
		if a.retryOutage {
			s.NextWakeReason = "retry after an outage (sooner if the dependency is back)"
		}
	}
	if now := a.clock.Now(); now.Before(a.throttledTo) {
		until := a.throttledTo
		s.ThrottledUntil, s.ThrottledBy = &until, a.throttledBy
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

// HaltReason says why the agent is halted ("" when it is not).
func (a *Agent) HaltReason() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.gate.halt
}
