package config

import (
	"strings"
	"testing"
)

// A publish pattern that can reach a subject the worker keeps to itself
// is refused: the model could otherwise rewrite its own approvals and
// spend in $KV, answer or send operator verbs, or forge events.
func TestPublishCannotReachInternalSubjects(t *testing.T) {
	t.Parallel()
	const (
		agentsInternal = "agents.*.events.>, agents.*.dlq, agents._subagents.jobs, agents._subagents.charges.*, agents._subagents.notice.*, agents._subagents.admit.*, agents._members"
		own            = "; publish may not write the worker's own state"
		toAgents       = "; to message other agents use agents.*.inbox or agents.*.deferred"
	)
	_, errs := loadText(t, `
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - name: a
    model: fake
    tools: [publish]
    publish:
      - ">"
      - "$KV.>"
      - "$JS.API.>"
      - "agents.*.control"
      - "_INBOX.>"
      - "agents.>"
      - "*.*.control"
      - "$SYS.>"
      - "$O.>"
      - "ops.reports.>"
      - "agents.other.inbox"
      - "agents.*.inbox"
      - "agents.*.deferred"
      - "agents.a.events.turn_started"
      - "agents._members"
`)
	assertErrors(t, errs, []string{
		`config.yaml:8: agents[0].publish[0]: ">" reaches the worker's state in JetStream KV ($KV.>) and 13 more internal subject spaces: $O.>, $JS.>, $SYS.>, _INBOX.>, _AW_INBOX.>, agents.*.control, ` + agentsInternal + own + toAgents,
		`config.yaml:9: agents[0].publish[1]: "$KV.>" reaches the worker's state in JetStream KV ($KV.>)` + own,
		`config.yaml:10: agents[0].publish[2]: "$JS.API.>" reaches the JetStream API ($JS.>)` + own,
		`config.yaml:11: agents[0].publish[3]: "agents.*.control" reaches the worker's control subjects (agents.<agent>.control)` + own,
		`config.yaml:12: agents[0].publish[4]: "_INBOX.>" reaches the request-reply inboxes (_INBOX.>)` + own,
		`config.yaml:13: agents[0].publish[5]: "agents.>" reaches the worker's control subjects (agents.<agent>.control) and 7 more internal subject spaces: ` + agentsInternal + own + toAgents,
		`config.yaml:14: agents[0].publish[6]: "*.*.control" reaches the worker's state in JetStream KV ($KV.>) and 6 more internal subject spaces: $O.>, $JS.>, $SYS.>, _INBOX.>, _AW_INBOX.>, agents.*.control` + own,
		`config.yaml:15: agents[0].publish[7]: "$SYS.>" reaches the NATS system subjects ($SYS.>)` + own,
		`config.yaml:16: agents[0].publish[8]: "$O.>" reaches the JetStream object stores ($O.>)` + own,
		`config.yaml:21: agents[0].publish[13]: "agents.a.events.turn_started" reaches the worker's event subjects (agents.<agent>.events.<type>)` + own,
		`config.yaml:22: agents[0].publish[14]: "agents._members" reaches the worker's membership subject (agents._members)` + own,
	})
}

// The internal subjects follow nats.subject_prefix: under another prefix
// "agents.*.control" is an ordinary subject, and the prefix's own control
// subjects are refused.
func TestPublishInternalSubjectsFollowTheSubjectPrefix(t *testing.T) {
	t.Parallel()
	_, errs := loadText(t, `
nats: {subject_prefix: corp}
models:
  fake: {provider: scripted, behaviour: demo}
agents:
  - name: a
    model: fake
    tools: [publish]
    publish:
      - "corp.*.control"
      - "corp.>"
      - "agents.*.control"
      - "corp.*.inbox"
      - "corp.other.deferred"
      - "$KV.>"
`)
	if len(errs) != 3 {
		t.Fatalf("want 3 errors, got %d:\n%s", len(errs), strings.Join(errs, "\n"))
	}
	for i, want := range []string{
		`config.yaml:9: agents[0].publish[0]: "corp.*.control" reaches the worker's control subjects (corp.<agent>.control); publish may not write the worker's own state`,
		`config.yaml:10: agents[0].publish[1]: "corp.>" reaches the worker's control subjects (corp.<agent>.control) and 7 more internal subject spaces: `,
		`config.yaml:14: agents[0].publish[5]: "$KV.>" reaches the worker's state in JetStream KV ($KV.>); publish may not write the worker's own state`,
	} {
		if !strings.HasPrefix(errs[i], want) {
			t.Errorf("error %d:\n  got:  %s\n  want: %s…", i, errs[i], want)
		}
	}
	if !strings.HasSuffix(errs[1], "; to message other agents use corp.*.inbox or corp.*.deferred") {
		t.Errorf("corp.> is not pointed at the agents' inboxes: %s", errs[1])
	}
}
