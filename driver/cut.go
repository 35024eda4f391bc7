package driver

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/inbox"
)

// isCut reports whether a failed turn was cut at a per-turn limit after
// it had spent money: stopped at a cap (tokens, tool calls, model calls
// per turn), or at turn.timeout after at least one model response. Such a
// turn is not retried with the same input: its messages are dead-lettered
// with inbox.RejectTurnCap, its tasks dropped, and the next prompt says what was
// cut. A turn that timed out before any model answered is retried as a
// failure: no response was charged, and a slow provider is not the
// input's fault.
func isCut(sum TurnSummary) bool {
	return sum.Outcome == OutcomeCapped || (sum.Outcome == OutcomeTimeout && sum.ModelCalls > 0)
}

// cutMessages dead-letters a cut turn's messages with inbox.RejectTurnCap (one
// from the log on its dead-letter subject, with the agent's cursors
// passing it; one only memory held as a dead-letter record), each logged
// and announced as message-dropped.
func (a *Agent) cutMessages(msgs []inbox.Message, cause error) {
	detail := "its turn was cut at a per-turn limit (" + limitOf(cause) + "); not retried, so it is not charged again"
	for _, m := range msgs {
		dead := a.giveUp(m, inbox.RejectTurnCap, detail)
		a.log.Warn("message dropped", "id", m.ID, "source", m.Source, "reason", inbox.RejectTurnCap, "limit", limitOf(cause), "dead_lettered", dead)
		a.emit(events.MessageDropped, map[string]any{"id": m.ID, "source": m.Source, "reason": inbox.RejectTurnCap, "dead_lettered": dead})
	}
}

// afterCut gives up a cut turn's tasks (schedule prompts, operator
// messages, timers, reports), each logged and announced as wake-dropped,
// and arms no retry. Wake messages the turn did not take (its input cap)
// run next, as after a completed turn.
func (a *Agent) afterCut(causes []Cause) time.Duration {
	for _, c := range causes {
		if c.Source.message() || c.Source == SourceRetry {
			continue
		}
		a.log.Warn("wake given up: its turn was cut at a per-turn limit", "source", c.Source, "name", c.Name)
		a.emit(events.WakeDropped, map[string]any{"source": string(c.Source), "name": c.Name, "reason": inbox.RejectTurnCap})
	}
	if w, _ := a.inbox.Len(); w > 0 {
		now := a.clock.Now()
		a.mu.Lock()
		if len(a.causes) == 0 {
			a.firstWake = now
		}
		a.causes = append(a.causes, Cause{Source: SourceInbox, At: now})
		a.mu.Unlock()
	}
	return 0
}

// tellCut notes for the next prompt what the cut turn left undone: how
// many messages were dead-lettered and which tasks were dropped (the
// schedule names are the config's; no message text is repeated).
func (a *Agent) tellCut(causes []Cause, messages int, cause error) {
	var undone []string
	if messages > 0 {
		undone = append(undone, fmt.Sprintf("its %d message(s) were not handled and went to the dead-letter queue (reason %s; an operator may replay them)", messages, inbox.RejectTurnCap))
	}
	for _, c := range causes {
		switch c.Source {
		case SourceSchedule:
			undone = append(undone, fmt.Sprintf("its scheduled task %q was dropped until its next tick", c.Name))
		case SourceOperator:
			if c.Instruction != "" || c.Data != nil {
				undone = append(undone, "the operator's message was dropped")
			}
		}
	}
	text := fmt.Sprintf("Your previous turn was cut at a per-turn limit (%s) and will not be retried", limitOf(cause))
	if len(undone) > 0 {
		text += ": " + strings.Join(undone, "; ")
	}
	a.Note(text + ".")
}

// limitOf names the per-turn limit a cut turn crossed, from its error.
func limitOf(cause error) string {
	if errors.Is(cause, ErrTurnTimeout) {
		return "turn.timeout"
	}
	if c, ok := errors.AsType[*hook.CapError](cause); ok {
		return c.Limit + " (" + c.Value + ")"
	}
	return cause.Error()
}
