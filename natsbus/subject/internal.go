package subject

// DefaultPrefix is the default nats.subject_prefix: the first token of
// every agent subject.
const DefaultPrefix = "agents"

// Tokens in the agent position of a subject under the prefix that name no
// agent but the worker's own subjects (agent names cannot start with
// "_"): natsbus.Subjects builds the subagents' subjects on
// SubagentsToken, package membership its heartbeat subject on
// MembersToken.
const (
	SubagentsToken = "_subagents"
	MembersToken   = "_members"
)

// Reserved is a space of subjects the worker keeps to itself: a message
// published there by anyone but the worker could rewrite its state, pose
// as an operator or forge what an agent did.
type Reserved struct {
	// Pattern covers the space, with NATS wildcards.
	Pattern string
	// What says what the space is, for the people refused by it, e.g.
	// "the worker's control subjects (agents.<agent>.control)".
	What string
}

// WorkerInboxPrefix is the prefix of the worker's own reply subjects
// (natsbus.InboxPrefix): apart from _INBOX, which publishers may read.
const WorkerInboxPrefix = "_AW_INBOX"

// Internal returns the subject spaces of a worker whose subjects are
// under prefix ("" means DefaultPrefix), in a fixed order: the
// JetStream, system and reply subjects of the account first, then the
// worker's own under the prefix. It must cover every subject the worker
// itself writes or listens on except the agents' inputs
// (<prefix>.<agent>.inbox and .deferred, and the subjects agents bind),
// which agents may write to talk to each other; natsbus's tests hold
// its subject layout to that.
//
// The $ spaces listed are the ones a client account sees; NATS reserves
// other $ roots too, which are not listed.
func Internal(prefix string) []Reserved {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	p := prefix + "."
	sub := p + SubagentsToken + "."
	return []Reserved{
		{"$KV.>", "the worker's state in JetStream KV ($KV.>)"},
		{"$O.>", "the JetStream object stores ($O.>)"},
		{"$JS.>", "the JetStream API ($JS.>)"},
		{"$SYS.>", "the NATS system subjects ($SYS.>)"},
		{"_INBOX.>", "the request-reply inboxes (_INBOX.>)"},
		{WorkerInboxPrefix + ".>", "the worker's own reply inboxes (" + WorkerInboxPrefix + ".>)"},
		{p + "*.control", "the worker's control subjects (" + p + "<agent>.control)"},
		{p + "*.events.>", "the worker's event subjects (" + p + "<agent>.events.<type>)"},
		{p + "*.dlq", "the worker's dead-letter subjects (" + p + "<agent>.dlq)"},
		{sub + "jobs", "the worker's subagent job queue (" + sub + "jobs)"},
		{sub + "charges.*", "the worker's subagent spend reports (" + sub + "charges.<parent>)"},
		{sub + "notice.*", "the worker's subagent halt notices (" + sub + "notice.<parent>)"},
		{sub + "admit.*", "the worker's subagent admission requests (" + sub + "admit.<parent>)"},
		{p + MembersToken, "the worker's membership subject (" + p + MembersToken + ")"},
	}
}

// Reaches returns the internal spaces of a worker under prefix (see
// Internal) that some subject matching pattern falls in, in Internal's
// order; none means every subject pattern matches is outside them.
// pattern may be a concrete subject: then it is the spaces it is in.
func Reaches(pattern, prefix string) []Reserved {
	var hits []Reserved
	for _, r := range Internal(prefix) {
		if Overlap(pattern, r.Pattern) {
			hits = append(hits, r)
		}
	}
	return hits
}
