package natsbus

import "testing"

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
