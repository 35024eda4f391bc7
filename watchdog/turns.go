package watchdog

import (
	"encoding/json"
	"fmt"
	"strings"
)

// SignalTurnRepeat: the same tool calls in TurnRepeat turns in a row,
// each woken only by the agent's own timer at the earliest it may — a
// loop spread across turns, which no per-turn detector sees.
const SignalTurnRepeat = "turn_repeat"

const defaultTurnRepeat = 5

// turnRepeat watches whole turns: the sequence of tool calls each eager
// turn makes (see hook.TurnInfo.Eager), and how many eager turns in a
// row made the same one. A turn woken by anything else — a message, a
// schedule, an operator, a wake the model asked for later than
// sleep.min — breaks the streak: the agent is not spinning on itself.
// After an alert the count starts over: a loop that goes on (after an
// operator reset, or in warn and feedback modes) alerts again every limit
// turns. Not safe for concurrent use; the caller serialises.
type turnRepeat struct {
	limit  int
	eager  bool
	calls  []string // this turn's calls, "tool canonical-args"
	last   string   // the previous eager turn's calls, joined
	streak int
}

func (t *turnRepeat) begin(eager bool) {
	t.eager, t.calls = eager, t.calls[:0]
}

func (t *turnRepeat) call(c Call) {
	args, _ := json.Marshal(c.Args) // map keys sorted: canonical
	t.calls = append(t.calls, c.Tool+" "+string(args))
}

// end closes the turn and returns the alert it completed, if any.
func (t *turnRepeat) end() []Alert {
	seq := strings.Join(t.calls, " → ")
	switch {
	case !t.eager || seq == "":
		t.last, t.streak = "", 0
		return nil
	case seq == t.last:
		t.streak++
	default:
		t.last, t.streak = seq, 1
	}
	if t.streak < t.limit {
		return nil
	}
	n := t.streak
	t.streak = 0
	pattern := seq
	if len(pattern) > 4*maxArgsBytes {
		pattern = pattern[:4*maxArgsBytes] + "…"
	}
	return []Alert{{
		Signal:   SignalTurnRepeat,
		Calls:    n,
		Pattern:  pattern,
		Blocking: true,
		Model: fmt.Sprintf("Your last %d turns each woke as soon as allowed and made the same tool calls: %s. "+
			"Running them again will not change their results; wait longer, or do something different.", n, pattern),
		Operator: fmt.Sprintf("the same tool calls in %d turns in a row, each woken by the agent's own timer at the earliest it may: %s", n, pattern),
	}}
}
