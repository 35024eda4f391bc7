package driver

import (
	"fmt"
	"time"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/inbox"
)

// Pause closes the gate: the running turn (if any) finishes, no new turn
// starts, messages stay queued. Pausing a paused agent is a no-op.
func (a *Agent) Pause() { a.PauseAs(hook.Audit{}) }

// PauseAs is Pause on behalf of by: the paused event carries by's caller
// and reason, and the stored pause keeps them with its time (PauseInfo),
// so status shows who paused the agent, since when and why — also after
// a restart or a change of owner. Pausing a paused agent changes nothing,
// not even who paused it, and reports false.
func (a *Agent) PauseAs(by hook.Audit) bool {
	a.mu.Lock()
	was := a.gate.paused
	if !was {
		a.gate.paused = true
		a.pause = PauseInfo{Since: a.clock.Now(), By: by.By, Reason: by.Reason}
	}
	a.pauseSet = true
	a.mu.Unlock()
	if was {
		return false
	}
	a.syncPause()
	a.log.Info("paused", "by", by.By, "reason", by.Reason)
	a.emit(events.Paused, by.Fields())
	return true
}

// Resume opens the gate and runs one turn with everything queued, plus
// message (if non-empty) as an operator instruction. It is the only way
// out of a pause. An agent restored from the store that is neither paused
// nor halted is not resumed: the error wraps ErrNotPaused and names the
// agent's state, and no turn runs (Wake runs one). Before the restore
// (and on a replica standing by) the stored pause is not known here, and
// a resume is taken as before.
func (a *Agent) Resume(message string) error {
	_, err := a.ResumeAs(hook.Audit{}, message, false)
	return err
}

// ResumeAs is Resume on behalf of by; its events (resumed, wake) carry
// by's caller and reason. With dropQueued it first abandons every message
// waiting in the inbox (wake and deferred): each is dropped with reason
// inbox.RejectOperatorDropped — a message from the log is dead-lettered with
// that reason and the agent's cursors pass it — and a message-dropped
// event and a log line name it; none is dropped silently. It returns how
// many were dropped.
//
// Dropping and opening the gate are one step under the agent's lock, so
// the resumed turn sees none of the dropped messages and every message
// that arrives after it. Not dropped: the messages of a turn still running
// (they are not queued), and messages the inbox has not read from the
// log yet because it was at its cap; they are read after and run.
func (a *Agent) ResumeAs(by hook.Audit, message string, dropQueued bool) (dropped int, err error) {
	a.mu.Lock()
	if a.gate.stopping {
		a.mu.Unlock()
		return 0, ErrStopped
	}
	// Refused only where the pause is known: on a replica that restored
	// the agent from the store. Before that (or standing by) the stored
	// pause may be one this replica has not read, and the resume stands
	// over it as it always did.
	if a.gate.restored && !a.gate.paused && a.gate.halt == "" {
		state := a.stateLocked()
		a.mu.Unlock()
		return 0, fmt.Errorf("agent %q is %w (state %s): nothing to resume; use wake to run a turn", a.spec.Name, ErrNotPaused, state)
	}
	var abandoned []inbox.Message
	if dropQueued {
		abandoned = a.inbox.Remove(func(inbox.Message) bool { return true })
	}
	// Opening the gate and queueing the resume's own wake happen under
	// one lock, so the turn the gate lets through includes the operator's
	// message.
	was := a.pause
	a.gate.paused = false
	a.pause = PauseInfo{}
	a.pauseSet = true
	a.retryAt = time.Time{}
	a.causes = append(a.causes, Cause{Source: SourceOperator, At: a.clock.Now(), Instruction: message})
	a.mu.Unlock()
	for _, m := range abandoned {
		a.abandon(m, by)
	}
	a.log.Info("resumed", "by", by.By, "reason", by.Reason, "dropped_queued", len(abandoned))
	data := audited(by, map[string]any{"message": message != ""})
	if dropQueued {
		data["dropped_queued"] = len(abandoned)
	}
	if !was.Since.IsZero() {
		data["paused_since"] = was.Since
		data["paused_by"] = was.By
	}
	a.emit(events.Resumed, data)
	a.emit(events.Wake, audited(by, map[string]any{"source": string(SourceOperator)}))
	a.syncPause()
	a.poke()
	return len(abandoned), nil
}

// abandon drops a queued message an operator gave up: one from the log is
// dead-lettered there, and the log and a message-dropped event say so.
func (a *Agent) abandon(m inbox.Message, by hook.Audit) {
	dead := a.giveUp(m, inbox.RejectOperatorDropped, "an operator abandoned the queued message (resume with drop_queued)")
	a.log.Warn("message dropped", "id", m.ID, "source", m.Source, "reason", inbox.RejectOperatorDropped, "by", by.By,
		"dead_lettered", dead)
	data := map[string]any{"id": m.ID, "source": m.Source, "reason": inbox.RejectOperatorDropped, "dead_lettered": dead}
	if by.By != "" {
		data["by"] = by.By
	}
	if by.Reason != "" {
		data["operator_reason"] = by.Reason
	}
	a.emit(events.MessageDropped, data)
}

// Interrupt cancels the running turn (its messages go back to the inbox).
// With hold, it also pauses the agent; cancelling and closing the gate
// happen under one lock, so no turn can start in between. It reports
// whether a turn was running.
func (a *Agent) Interrupt(hold bool) bool { return a.InterruptAs(hook.Audit{}, hold) }

// InterruptAs is Interrupt on behalf of by: the interrupted event (and
// the paused event of a hold) carry by's caller and reason, and a hold
// stores them with the pause as PauseAs does.
func (a *Agent) InterruptAs(by hook.Audit, hold bool) bool {
	a.mu.Lock()
	wasRunning := a.running
	pausedNow := hold && !a.gate.paused
	if hold {
		if pausedNow {
			a.pause = PauseInfo{Since: a.clock.Now(), By: by.By, Reason: by.Reason, Interrupt: true}
		}
		a.gate.paused = true
		a.pauseSet = true
	}
	if a.cancelTurn != nil {
		a.cancelTurn(ErrInterrupted)
	}
	a.mu.Unlock()
	if hold {
		a.syncPause()
	}
	a.log.Info("interrupted", "hold", hold, "turn_running", wasRunning, "by", by.By, "reason", by.Reason)
	a.emit(events.Interrupted, audited(by, map[string]any{"hold": hold, "turn_running": wasRunning}))
	if pausedNow {
		a.emit(events.Paused, audited(by, map[string]any{"via": "interrupt"}))
	}
	return wasRunning
}

// PauseInfo returns the agent's pause — since when, by whom, why — and
// whether it is paused. A pause restored from the store carries what was
// stored with it.
func (a *Agent) PauseInfo() (PauseInfo, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.gate.paused {
		return PauseInfo{}, false
	}
	return a.pause, true
}

// Queued lists the messages waiting in the agent's inbox, oldest first,
// without taking them: what a resume would run (or, with dropQueued,
// abandon). The messages of a running turn are not listed.
func (a *Agent) Queued() []QueuedMessage {
	now := a.clock.Now()
	var out []QueuedMessage
	// Remove with a match that keeps everything walks the queue under
	// the inbox's lock and changes nothing.
	a.inbox.Remove(func(m inbox.Message) bool {
		out = append(out, queuedOf(m, now))
		return false
	})
	if out == nil {
		out = []QueuedMessage{}
	}
	return out
}

// Halt closes the gate for reason (a guardrail trip) and cancels the
// running turn. Only ClearHalt reopens it.
func (a *Agent) Halt(reason string) {
	a.mu.Lock()
	a.gate.halt = reason
	cancel := a.cancelTurn
	a.mu.Unlock()
	a.log.Warn("halted", "reason", reason)
	// Announced before the running turn is cancelled, so the event is
	// on the turn's span: a cancelled turn may end, and its span with
	// it, before a later emit reaches the span.
	a.emit(events.Halted, map[string]any{"reason": reason})
	if cancel != nil {
		cancel(fmt.Errorf("%w: %s", hook.ErrHalted, reason))
	}
}

// Note adds a remark from the worker to the agent's next prompt.
func (a *Agent) Note(text string) {
	a.mu.Lock()
	a.notes = append(a.notes, text)
	a.mu.Unlock()
}

// StopTurn cancels the running turn with cause (for example a per-turn
// cap), without closing the gate.
func (a *Agent) StopTurn(cause error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cancelTurn != nil {
		a.cancelTurn(cause)
	}
}

// ClearHalt reopens a halted agent's gate; if wake messages are waiting,
// a turn follows.
func (a *Agent) ClearHalt() {
	a.mu.Lock()
	a.gate.halt = ""
	a.mu.Unlock()
	a.log.Info("halt cleared")
	if w, _ := a.inbox.Len(); w > 0 {
		a.Wake(Cause{Source: SourceOperator})
	}
	a.poke()
}
