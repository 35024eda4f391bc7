package driver

import (
	"time"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/scheduler"
)

// Send queues m. A wake message wakes the agent (behind the gate); a
// deferred one waits for the next turn. Received is stamped when zero, and
// an ID made up when empty, so every message can be looked up.
func (a *Agent) Send(m inbox.Message) {
	m = a.stamped(m)
	a.inbox.Push(m)
	a.queued(m, false)
}

// onDrop is told of a message the inbox gave up (failed in too many
// turns; a memory-only message over the cap): one from the log is
// dead-lettered there, one only memory held gets a dead-letter record.
func (a *Agent) onDrop(m inbox.Message, reason string) {
	dead := a.giveUp(m, inbox.RejectDropped, reason)
	a.log.Warn("message dropped", "id", m.ID, "source", m.Source, "reason", reason, "dead_lettered", dead)
	a.emit(events.MessageDropped, map[string]any{"id": m.ID, "source": m.Source, "reason": reason, "dead_lettered": dead})
}

// Report queues a background subagent's report and wakes the agent with
// a subagent cause naming it.
func (a *Agent) Report(subagent string, m inbox.Message) {
	m.Kind = inbox.Wake
	m = a.stamped(m)
	a.inbox.Push(m)
	a.emit(events.MessageQueued, map[string]any{"id": m.ID, "kind": string(m.Kind), "source": m.Source})
	a.Wake(Cause{Source: SourceSubagent, Name: subagent, At: m.Received})
}

// Wake asks for a turn for cause c. Wakes coalesce: all causes waiting
// when a turn starts go into that turn. A paused or halted agent keeps the
// cause for the turn its release runs.
func (a *Agent) Wake(c Cause) { a.wake(c, nil) }

// WakeAs is an operator's Wake (source operator, with message as the
// turn's instruction when non-empty): its wake event carries who asked and
// why.
func (a *Agent) WakeAs(by hook.Audit, message string) {
	a.wake(Cause{Source: SourceOperator, Instruction: message}, by.Fields())
}

// wake is Wake with extra data for the wake event.
func (a *Agent) wake(c Cause, extra map[string]any) {
	if c.At.IsZero() {
		c.At = a.clock.Now()
	}
	a.mu.Lock()
	if a.gate.stopping {
		a.mu.Unlock()
		a.log.Info("wake ignored: agent is stopping", "source", c.Source)
		return
	}
	if len(a.causes) == 0 {
		a.firstWake = a.clock.Now()
	}
	a.causes = append(a.causes, c)
	if c.Source == SourceOperator {
		// An operator asking for a turn means now, not after the
		// backoff of an earlier failure.
		a.retryAt = time.Time{}
	}
	a.mu.Unlock()
	data := map[string]any{"source": string(c.Source), "name": c.Name}
	for k, v := range extra {
		data[k] = v
	}
	a.emit(events.Wake, data)
	a.poke()
}

// Fire takes a schedule tick or timer from the scheduler as a wake.
func (a *Agent) Fire(f scheduler.Fire) {
	c := Cause{Due: f.Due}
	switch f.Kind {
	case scheduler.KindSchedule:
		c.Source, c.Name, c.Instruction = SourceSchedule, f.Schedule, f.Prompt
	case scheduler.KindHeartbeat:
		c.Source = SourceHeartbeat
	default:
		c.Source = SourceTimer
	}
	a.Wake(c)
}

// PendingFire reports whether a fire of the schedule waits for the next
// turn (scheduler.Target, for overlap: queue).
func (a *Agent) PendingFire(schedule string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.causes {
		if c.Source == SourceSchedule && c.Name == schedule {
			return true
		}
	}
	return false
}
