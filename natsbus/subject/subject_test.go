package subject

import "testing"

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
