package natsbus

import (
	"strings"

	"github.com/agent-worker/agent-worker/natsbus/subject"
)

// Subjects names the contract's subjects under one prefix (default
// "agents"):
//
//	<prefix>.<agent>.inbox          wakes the agent
//	<prefix>.<agent>.deferred       waits for the next turn
//	<prefix>.<agent>.control        operator verbs, request/reply
//	<prefix>.<agent>.events.<type>  what the agent did
//	<prefix>.<agent>.dlq            rejected input, with a reason header
//
// and the subagents' (package background/distributed), under the reserved token
// "_subagents":
//
//	<prefix>._subagents.jobs              subagent jobs (work-queue stream)
//	<prefix>._subagents.charges.<parent>  a subagent's spend, for the parent's owner (work-queue stream)
//	<prefix>._subagents.notice.<parent>   halt and stop notices to the replicas running the parent's subagents
//	<prefix>._subagents.admit.<parent>    may the parent's subagents call their model? request/reply, the owner answers
type Subjects struct{ Prefix string }

// subagentsToken is the agent-position token of the subagent subjects.
const subagentsToken = subject.SubagentsToken

// SubagentJobs is the subject subagent jobs are queued on.
func (s Subjects) SubagentJobs() string { return s.Prefix + "." + subagentsToken + ".jobs" }

// SubagentCharges is the subject the spend of parent's subagents is sent
// on, for parent's owner to charge.
func (s Subjects) SubagentCharges(parent string) string {
	return s.Prefix + "." + subagentsToken + ".charges." + parent
}

// AllSubagentCharges matches every parent's charges subject.
func (s Subjects) AllSubagentCharges() string { return s.SubagentCharges("*") }

// SubagentNotice is the subject of halt and stop notices for parent's
// subagents.
func (s Subjects) SubagentNotice(parent string) string {
	return s.Prefix + "." + subagentsToken + ".notice." + parent
}

// AllSubagentNotices matches every parent's notice subject.
func (s Subjects) AllSubagentNotices() string { return s.SubagentNotice("*") }

// SubagentAdmit is the request subject on which parent's owner admits (or
// refuses) its subagents' model calls.
func (s Subjects) SubagentAdmit(parent string) string {
	return s.Prefix + "." + subagentsToken + ".admit." + parent
}

// AllSubagentAdmits matches every parent's admit subject.
func (s Subjects) AllSubagentAdmits() string { return s.SubagentAdmit("*") }

// SubagentParent returns the parent token of a charges, notice or admit
// subject.
func (s Subjects) SubagentParent(subject string) (string, bool) {
	rest, ok := strings.CutPrefix(subject, s.Prefix+"."+subagentsToken+".")
	if !ok {
		return "", false
	}
	_, parent, ok := strings.Cut(rest, ".")
	return parent, ok && parent != "" && !strings.Contains(parent, ".")
}

// UnknownAgent is the agent token of the dead-letter subject for input
// addressed to an agent that is not configured.
const UnknownAgent = "_unknown"

// Inbox returns the agent's waking subject.
func (s Subjects) Inbox(agent string) string { return s.Prefix + "." + agent + ".inbox" }

// Deferred returns the agent's non-waking subject.
func (s Subjects) Deferred(agent string) string { return s.Prefix + "." + agent + ".deferred" }

// Control returns the agent's operator request subject.
func (s Subjects) Control(agent string) string { return s.Prefix + "." + agent + ".control" }

// Event returns the subject an event of type typ is published on.
func (s Subjects) Event(agent, typ string) string { return s.Prefix + "." + agent + ".events." + typ }

// DLQ returns the agent's dead-letter subject.
func (s Subjects) DLQ(agent string) string { return s.Prefix + "." + agent + ".dlq" }

// AllInboxes and AllDeferred match every agent's input subjects.
func (s Subjects) AllInboxes() string  { return s.Prefix + ".*.inbox" }
func (s Subjects) AllDeferred() string { return s.Prefix + ".*.deferred" }

// AllControl matches every agent's control subject.
func (s Subjects) AllControl() string { return s.Prefix + ".*.control" }

// Agent returns the agent token and the kind ("inbox", "deferred",
// "control", ...) of a subject under the prefix.
func (s Subjects) Agent(subject string) (agent, kind string, ok bool) {
	rest, found := strings.CutPrefix(subject, s.Prefix+".")
	if !found {
		return "", "", false
	}
	agent, kind, found = strings.Cut(rest, ".")
	if !found || agent == "" {
		return "", "", false
	}
	return agent, kind, true
}
