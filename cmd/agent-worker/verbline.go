package main

import (
	"fmt"

	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/inbox/natsinbox"
)

// verbLine is the line pause, resume, interrupt and wake print for a
// person: what the owner did, on which replica, and what follows from it
// ("oncall: paused on w-1 (reason: db migration); messages stay queued
// until resume"). reason is the --reason sent; hold is interrupt's (not
// --no-hold). The API's whole answer is what -o json prints.
func verbLine(agent, verb, reason string, hold bool, r control.Reply) string {
	on := ""
	if r.Owner != "" {
		on = " on " + r.Owner
	}
	why := ""
	if reason != "" {
		why = " (reason: " + oneLine(reason) + ")"
	}
	now := ""
	if r.State != "" {
		now = ", now " + r.State
	}
	switch verb {
	case control.VerbPause:
		return agent + ": paused" + on + why + "; messages stay queued until resume"
	case control.VerbResume:
		s := agent + ": resumed" + on + why + now
		if r.Dropped != nil {
			s += fmt.Sprintf("; %d queued message(s) dropped (dead-lettered as operator_dropped)", *r.Dropped)
		}
		return s
	case control.VerbInterrupt:
		running := r.TurnRunning != nil && *r.TurnRunning
		switch {
		case running && hold:
			return agent + ": turn cancelled and paused" + on + why + "; resume runs it again"
		case hold:
			return agent + ": no turn was running; paused" + on + why + "; resume runs it again"
		case running:
			return agent + ": turn cancelled" + on + why + "; not paused"
		default:
			return agent + ": no turn was running" + on + "; nothing cancelled, not paused"
		}
	case control.VerbWake:
		return agent + ": woken" + on + why + now
	}
	return agent + ": " + verb + " done" + on + why + now
}

// replayLine is the line dlq replay prints: which dead letter went back
// to the agent's inbox. seq is the one asked for, used when the answer
// names none.
func replayLine(agent, seq string, dl *natsinbox.DeadLetter) string {
	if dl == nil || dl.Seq == 0 {
		return fmt.Sprintf("%s: dead letter %s replayed to the inbox", agent, seq)
	}
	what := dl.Reason
	if dl.ID != "" {
		what = "id " + dl.ID + ", " + what
	}
	return fmt.Sprintf("%s: dead letter %d (%s) replayed to the inbox", agent, dl.Seq, what)
}
