package driver

import (
	"strings"

	"github.com/agent-worker/agent-worker/events"
)

// SkipNothingToDo is turn-skipped's reason when the waiting wakes owe no
// turn: an operator's bare wake or resume, or the retry of a failed turn,
// with nothing queued for a turn to take.
const SkipNothingToDo = "nothing_to_do"

// idleLocked reports whether the waiting causes give a turn nothing to
// do, so it would only pay for a model call with no input: every cause is
// a wake message (whose messages are gone by now), the automatic retry
// of a failed turn, or an operator's wake or resume that carries no
// instruction and no data — and no message waits (wake or deferred, in
// the inbox or still in the log) and no unfinished turn waits to be
// resumed. A schedule prompt, a timer or heartbeat the agent asked for, a
// subagent's report, a start-up wake, an operator's message or an
// approval decision is always work. Callers hold mu.
func (a *Agent) idleLocked() bool {
	for _, c := range a.causes {
		switch {
		case c.Source.message(), c.Source == SourceRetry:
		case c.Source == SourceOperator && c.Instruction == "" && c.Data == nil:
		default:
			return false
		}
	}
	if w, d := a.inbox.Len(); w+d+a.lg.waiting > 0 {
		return false
	}
	return a.jr == nil || !a.jr.hasPending()
}

// skipLocked drops the waiting causes of an idle wake (idleLocked) and
// says so: no model is called, the log and a turn-skipped event name the
// wakes. The notes stay for the next turn that runs. Callers hold mu.
func (a *Agent) skipLocked() {
	wakes, _, _ := coalesce(a.causes)
	a.causes = nil
	a.consecutive = 0
	a.log.Info("turn skipped: nothing to do (no message, task, instruction, report or decision queued); no model call", "wakes", strings.Join(wakes, "; "))
	a.emit(events.TurnSkipped, map[string]any{"reason": SkipNothingToDo, "wakes": wakes})
}
