package subject

import (
	"strings"
	"testing"
)

// Overlap is what the internal check rests on: the cases a publish
// pattern can take against the worker's own subject spaces.
func TestOverlapAgainstInternalSpaces(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{">", "$KV.>", true},
		{"*.>", "$KV.>", true},
		{"$KV.>", "$KV.AGENTS_STATE.agent.x.approvals", true},
		{"$JS.API.>", "$JS.>", true},
		{"agents.*.control", "agents.*.control", true},
		{"*.*.control", "agents.*.control", true},
		{"agents.>", "agents.*.control", true},
		{"agents.*.inbox", "agents.*.control", false},
		{"agents.*.inbox", "agents._subagents.jobs", false},
		{"agents.*.inbox", "agents._members", false},
		{"agents.*", "agents._members", true},
		{"agents.*.*", "agents.*.dlq", true},
		{"agents.other.inbox", "agents.*.events.>", false},
		{"agents.*.events", "agents.*.events.>", false},
		{"ops.reports.>", "$KV.>", false},
		{"ops.reports.>", "agents.*.control", false},
		{"a.*.>", "a.>", true},
		{"*", "$KV.>", false},
	} {
		if got := Overlap(tt.a, tt.b); got != tt.want {
			t.Errorf("Overlap(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got := Overlap(tt.b, tt.a); got != tt.want {
			t.Errorf("Overlap(%q, %q) = %v, want %v (not symmetric)", tt.b, tt.a, got, tt.want)
		}
	}
}

func TestReaches(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		prefix, pattern string
		want            string // the first internal space reached; "" for none
	}{
		{"agents", ">", "$KV.>"},
		{"agents", "$KV.>", "$KV.>"},
		{"agents", "$KV.AGENTS_STATE.agent.x.approvals", "$KV.>"},
		{"agents", "$KV.AGENTS_STATE.guard.x", "$KV.>"},
		{"agents", "$JS.API.>", "$JS.>"},
		{"agents", "$SYS.>", "$SYS.>"},
		{"agents", "$O.>", "$O.>"},
		{"agents", "_INBOX.>", "_INBOX.>"},
		{"agents", "agents.*.control", "agents.*.control"},
		{"agents", "agents.x.control", "agents.*.control"},
		{"agents", "*.*.control", "$KV.>"}, // $KV.<bucket>.control is a key
		{"agents", "agents.*.*.control", "agents.*.events.>"},
		{"agents", "ops.*.control", ""},
		{"agents", "agents.>", "agents.*.control"},
		{"agents", "agents.x.events.turn_started", "agents.*.events.>"},
		{"agents", "agents.x.dlq", "agents.*.dlq"},
		{"agents", "agents._unknown.dlq", "agents.*.dlq"},
		{"agents", "agents._subagents.jobs", "agents._subagents.jobs"},
		{"agents", "agents._subagents.charges.x", "agents._subagents.charges.*"},
		{"agents", "agents._subagents.notice.x", "agents._subagents.notice.*"},
		{"agents", "agents._subagents.admit.x", "agents._subagents.admit.*"},
		{"agents", "agents._members", "agents._members"},
		{"agents", "ops.reports.>", ""},
		{"agents", "agents.other.inbox", ""},
		{"agents", "agents.*.inbox", ""},
		{"agents", "agents.*.deferred", ""},
		{"agents", "ops.x", ""},
		{"", "agents.x.control", "agents.*.control"}, // "" is DefaultPrefix
		{"corp", "corp.*.control", "corp.*.control"},
		{"corp", "corp.>", "corp.*.control"},
		{"corp", "agents.x.control", ""},
		{"corp", "corp.*.inbox", ""},
	} {
		got := ""
		if hits := Reaches(tt.pattern, tt.prefix); len(hits) > 0 {
			got = hits[0].Pattern
		}
		if got != tt.want {
			t.Errorf("Reaches(%q, prefix %q) first = %q, want %q", tt.pattern, tt.prefix, got, tt.want)
		}
	}
}

// Every internal space says what it is, for the people refused by it.
func TestInternalSaysWhatEachSpaceIs(t *testing.T) {
	t.Parallel()
	for _, r := range Internal("corp") {
		if r.Pattern == "" || r.What == "" {
			t.Errorf("internal space %+v lacks a pattern or a description", r)
		}
		if strings.HasPrefix(r.Pattern, "corp.") && !strings.Contains(r.What, "corp.") {
			t.Errorf("%s: description %q does not show the prefix", r.Pattern, r.What)
		}
	}
	if hits := Reaches(">", "corp"); len(hits) != len(Internal("corp")) {
		t.Errorf("\">\" reaches %d internal spaces, want all %d", len(hits), len(Internal("corp")))
	}
}
