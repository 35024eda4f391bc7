package main

import (
	"fmt"
	"time"

	"github.com/agent-worker/agent-worker/approval"
	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/inbox/natsinbox"
	"github.com/agent-worker/agent-worker/internal/textclip"
	"github.com/agent-worker/agent-worker/money"
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

// scheduleLine is the line schedule run prints: the fire and when the
// schedule's own next tick is.
func scheduleLine(agent, schedule string, r control.ScheduleRun, now time.Time) string {
	s := agent + ": schedule " + schedule + " fired; its prompt runs in a turn now"
	if r.NextFire != nil {
		s += "; next tick " + relTime(*r.NextFire, now)
	}
	return s
}

// resetLine is the line reset prints: what the owner's ledger says now.
func resetLine(agent string, r guard.ResetResult) string {
	s := agent + ": " + r.Guardrail + " reset"
	if r.AddedUSD > 0 {
		s += fmt.Sprintf("; ceiling %s → %s (added %s)", money.USD(r.CeilingBeforeUSD), money.USD(r.CeilingUSD), money.USD(r.AddedUSD))
	}
	if r.CeilingUSD > 0 {
		s += fmt.Sprintf("; spent %s of %s", money.USD(r.SpentUSD), money.USD(r.CeilingUSD))
	}
	if r.Cleared {
		return s + "; trip cleared: the agent runs again"
	}
	return s + "; no trip to clear"
}

// decisionLine is the line approve and deny print: the call decided and
// what follows.
func decisionLine(agent, reason string, d approvalDecision) string {
	why := ""
	if reason != "" {
		why = " (reason: " + oneLine(reason) + ")"
	}
	call := textclip.Runes(approval.Describe(d.Request), 80, "…")
	if d.Decision == driver.DecisionApproved {
		return fmt.Sprintf("%s: approved %s, %s%s; it runs now and the agent is woken with its result", agent, d.Request.ID, call, why)
	}
	return fmt.Sprintf("%s: denied %s, %s%s; it never runs and the agent is told", agent, d.Request.ID, call, why)
}

// approvalDecision is the API's answer to approve and deny.
type approvalDecision struct {
	Decision string           `json:"decision"`
	Request  approval.Request `json:"request"`
}
