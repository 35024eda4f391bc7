package control

import "github.com/agent-worker/agent-worker/access"

// needs is what each verb needs of a caller's role. It is the one table
// of it: the HTTP API registers its route for each verb with Need(verb),
// so a token may do the same over HTTP and over NATS.
var needs = map[string]access.Need{
	VerbView:      access.Read,
	VerbInbox:     access.Read,
	VerbMessage:   access.Read,
	VerbMemory:    access.Read,
	VerbApprovals: access.Read,

	VerbPause:         access.Operate,
	VerbResume:        access.Operate,
	VerbInterrupt:     access.Operate,
	VerbWake:          access.Operate,
	VerbReset:         access.Operate,
	VerbRunSchedule:   access.Operate,
	VerbMemoryCompact: access.Operate,
	VerbMemoryClear:   access.Operate,
	VerbApprove:       access.Operate,
	VerbDeny:          access.Operate,
	VerbAsk:           access.Operate, // it spends the agent's budget
	VerbModel:         access.Operate,
	VerbSteer:         access.Operate, // operator text, trusted by the model
}

// Need returns what verb needs of a caller's role: access.Read for the
// verbs that change nothing (view, inbox, message, memory, approvals),
// access.Operate for every other verb, one this package does not know
// included.
func Need(verb string) access.Need {
	if n, ok := needs[verb]; ok {
		return n
	}
	return access.Operate
}
