package tools

import (
	"strings"
	"testing"
	"time"
)

func TestClamp(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := Sleep{Min: 30 * time.Second, Max: time.Hour}
	for _, tc := range []struct {
		name string
		in   time.Duration
		want time.Duration
		note string
	}{
		{"inside", 10 * time.Minute, 10 * time.Minute, ""},
		{"below min", 5 * time.Second, 30 * time.Second, "below this agent's minimum sleep of 30s"},
		{"in the past", -time.Minute, 30 * time.Second, "the past"},
		{"beyond max", 3 * time.Hour, time.Hour, "beyond this agent's maximum sleep of 1h0m0s"},
		{"at min", 30 * time.Second, 30 * time.Second, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, note := Clamp(now, now.Add(tc.in), s)
			if !got.Equal(now.Add(tc.want)) {
				t.Errorf("Clamp(%v) = +%v, want +%v", tc.in, got.Sub(now), tc.want)
			}
			if (tc.note == "") != (note == "") || !strings.Contains(note, tc.note) {
				t.Errorf("note = %q, want one containing %q", note, tc.note)
			}
		})
	}
}

func TestBuildRejectsUnknownTool(t *testing.T) {
	t.Parallel()
	if _, err := Build([]string{"rm_rf"}, Env{}); err == nil || !strings.Contains(err.Error(), `"rm_rf"`) {
		t.Fatalf("err = %v", err)
	}
}
