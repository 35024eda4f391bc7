package natsbus

import "strings"

// Subjects names the contract's subjects under one prefix (default
// "agents"):
//
//	<prefix>.<agent>.inbox          wakes the agent
//	<prefix>.<agent>.deferred       waits for the next turn
//	<prefix>.<agent>.control        operator verbs, request/reply
//	<prefix>.<agent>.events.<type>  what the agent did
//	<prefix>.<agent>.dlq            rejected input, with a reason header
type Subjects struct{ Prefix string }

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
