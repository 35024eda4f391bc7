package driver

import (
	"fmt"
	"strings"
	"time"

	"github.com/agent-worker/agent-worker/inbox"
)

// Source is what woke an agent.
type Source string

// Wake sources.
const (
	SourceInbox     Source = "inbox"
	SourceTimer     Source = "timer"
	SourceHeartbeat Source = "heartbeat"
	SourceSchedule  Source = "schedule"
	SourceOperator  Source = "operator"
	SourceSubagent  Source = "subagent"
	SourceStartup   Source = "startup"
	// SourceRetry: the automatic retry of a failed turn.
	SourceRetry Source = "retry"
	// SourceAlertmanager: a message that came through the Alertmanager
	// receiver (inbox.Message.Via is inbox.ViaAlertmanager). Otherwise it
	// is an inbox message like any other.
	SourceAlertmanager Source = "alertmanager"
)

// message reports whether the cause is a wake message in the inbox: the
// message carries it, so it is not kept or retried on its own.
func (s Source) message() bool { return s == SourceInbox || s == SourceAlertmanager }

// Cause is one reason to wake. Several causes that arrive before a turn
// starts are coalesced into that turn.
type Cause struct {
	Source Source
	// Name qualifies the source: the schedule's or subagent's name.
	Name string
	// At is when the cause arose (message received, timer due); wake
	// latency is measured from it.
	At time.Time
	// Due is when a schedule tick or timer was meant to fire.
	Due time.Time
	// Instruction is trusted text for the turn: a schedule's prompt or an
	// operator's message.
	Instruction string
	// Data is untrusted input that goes with the cause — an approved
	// call's arguments and result — rendered inside the external-data
	// fence, never as Instruction.
	Data *inbox.Message
	// Attempts counts failed turns the cause was in (a task is given up
	// after MaxAttempts).
	Attempts int
}

// describe renders the cause for the [wake: ...] line.
func (c Cause) describe() string {
	var b strings.Builder
	switch c.Source {
	case SourceInbox:
		b.WriteString("inbox message")
	case SourceAlertmanager:
		b.WriteString("Alertmanager notification")
	case SourceTimer:
		b.WriteString("timer you requested")
	case SourceSchedule:
		fmt.Fprintf(&b, "schedule %q", c.Name)
	case SourceSubagent:
		fmt.Fprintf(&b, "subagent %q reported", c.Name)
	case SourceStartup:
		b.WriteString("worker started")
	case SourceRetry:
		b.WriteString("retry after a failed turn")
	default:
		b.WriteString(string(c.Source))
	}
	if !c.Due.IsZero() {
		fmt.Fprintf(&b, " (due %s)", c.Due.UTC().Format(time.RFC3339))
	}
	return b.String()
}

// coalesce merges causes for the prompt: the same description appears
// once, in first-arrival order, with a count. data is the causes' untrusted
// input, in order.
func coalesce(causes []Cause) (wakes, instructions []string, data []inbox.Message) {
	counts := map[string]int{}
	var order []string
	for _, c := range causes {
		d := c.describe()
		if counts[d] == 0 {
			order = append(order, d)
		}
		counts[d]++
		if c.Instruction != "" {
			instructions = append(instructions, instructionText(c))
		}
		if c.Data != nil {
			data = append(data, *c.Data)
		}
	}
	for _, d := range order {
		if n := counts[d]; n > 1 {
			d = fmt.Sprintf("%s ×%d", d, n)
		}
		wakes = append(wakes, d)
	}
	return wakes, instructions, data
}

func instructionText(c Cause) string {
	switch c.Source {
	case SourceSchedule:
		return fmt.Sprintf("Scheduled task %q (due %s):\n%s", c.Name, c.Due.UTC().Format(time.RFC3339), c.Instruction)
	case SourceOperator:
		if strings.HasPrefix(c.Name, noticeCause) {
			return "About your held call:\n" + c.Instruction
		}
		return "Message from the operator:\n" + c.Instruction
	default:
		return c.Instruction
	}
}
