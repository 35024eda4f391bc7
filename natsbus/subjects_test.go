package natsbus

import (
	"testing"

	"github.com/agent-worker/agent-worker/membership"
	"github.com/agent-worker/agent-worker/natsbus/subject"
)

func TestSubjectsAgent(t *testing.T) {
	t.Parallel()
	s := Subjects{Prefix: "agents"}
	if a, k, ok := s.Agent(s.Deferred("oncall")); !ok || a != "oncall" || k != "deferred" {
		t.Fatalf("Agent(deferred) = %q %q %v", a, k, ok)
	}
	if _, _, ok := s.Agent("alerts.prod.db"); ok {
		t.Fatal("a subject outside the prefix parsed as an agent subject")
	}
}

// subject.Internal, which config validation and the publish tool refuse,
// covers every subject the worker writes or listens on for itself, and
// none of the agents' inputs, which agents may publish to.
func TestInternalCoversTheWorkersSubjects(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"agents", "corp"} {
		s := Subjects{Prefix: prefix}
		for _, own := range []string{
			s.Control("oncall"), s.AllControl(), s.Event("oncall", "turn_started"), s.DLQ("oncall"), s.DLQ(UnknownAgent),
			s.SubagentJobs(), s.SubagentCharges("oncall"), s.AllSubagentCharges(), s.SubagentNotice("oncall"),
			s.AllSubagentNotices(), s.SubagentAdmit("oncall"), s.AllSubagentAdmits(), membership.Subject(prefix),
		} {
			if len(subject.Reaches(own, prefix)) == 0 {
				t.Errorf("prefix %q: the worker's subject %q is not internal", prefix, own)
			}
		}
		for _, input := range []string{s.Inbox("oncall"), s.Deferred("oncall"), s.AllInboxes(), s.AllDeferred()} {
			if hits := subject.Reaches(input, prefix); len(hits) > 0 {
				t.Errorf("prefix %q: input %q counted internal (%s)", prefix, input, hits[0].What)
			}
		}
	}
}
