package subject

import (
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pattern, subject string
		want             bool
	}{
		{"ops.reports.>", "ops.reports.capacity", true},
		{"ops.reports.>", "ops.reports.a.b", true},
		{"ops.reports.>", "ops.reports", false},
		{"ops.*.capacity", "ops.reports.capacity", true},
		{"ops.*.capacity", "ops.reports.x", false},
		{"ops.reports", "ops.reports", true},
		{"ops.reports", "ops.reports.x", false},
		{">", "anything.at.all", true},
		{"a.*", "a", false},
	} {
		if got := Match(tc.pattern, tc.subject); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.pattern, tc.subject, got, tc.want)
		}
	}
}

func TestValid(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{"ops.reports": true, "": false, "a..b": false, "a.*": false, "a.>": false, "a b": false, ".a": false} {
		if Valid(s) != want {
			t.Errorf("Valid(%q) = %v", s, !want)
		}
	}
}

func TestOverlap(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"alerts.prod.db", "alerts.prod.db", true},
		{"alerts.prod.db", "alerts.prod.web", false},
		{"alerts.>", "alerts.low.disk", true},
		{"alerts.>", "alerts", false},
		{"alerts.*", "alerts.low.disk", false},
		{"alerts.*.disk", "alerts.low.*", true},
		{"alerts.*", "metrics.*", false},
		{">", "anything.at.all", true},
		{"a.b.>", "a.*.c.d", true},
		{"a.b", "a.b.c", false},
	} {
		if got := Overlap(tt.a, tt.b); got != tt.want {
			t.Errorf("Overlap(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got := Overlap(tt.b, tt.a); got != tt.want {
			t.Errorf("Overlap(%q, %q) = %v, want %v (not symmetric)", tt.b, tt.a, got, tt.want)
		}
	}
}

func TestCovers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		wide, narrow string
		want         bool
	}{
		{"alerts.>", "alerts.prod.>", true},
		{"alerts.>", "alerts.prod.db", true},
		{"alerts.>", "alerts", false},
		{"alerts.*", "alerts.db", true},
		{"alerts.*", "alerts.*", true},
		{"alerts.*", "alerts.>", false},
		{"alerts.*.db", "alerts.prod.*", false},
		{"alerts.prod.>", "alerts.>", false},
		{">", "anything.at.all", true},
		{"a.b", "a.b", true},
		{"a.b", "a.c", false},
		{"a.*.c", "a.b.c", true},
	} {
		if got := Covers(c.wide, c.narrow); got != c.want {
			t.Errorf("Covers(%q, %q) = %v, want %v", c.wide, c.narrow, got, c.want)
		}
	}
}

func TestCover(t *testing.T) {
	t.Parallel()
	got, err := Cover([]string{"alerts.prod.>", "agents.*.inbox", "alerts.>", "alerts.>", "tickets.new"})
	if err != nil || strings.Join(got, " ") != "agents.*.inbox alerts.> tickets.new" {
		t.Fatalf("Cover = %v, %v", got, err)
	}
	_, err = Cover([]string{"alerts.*.db", "alerts.prod.*"})
	if err == nil || !strings.Contains(err.Error(), `"alerts.>"`) {
		t.Fatalf("partial overlap: %v", err)
	}
}
