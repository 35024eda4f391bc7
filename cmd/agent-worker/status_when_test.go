package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/api"
)

// pausedMorning: an agent paused by ops whose next wake is its Berlin
// schedule "morning" (skipped while paused), with a UTC schedule too.
func pausedMorning(now time.Time) api.AgentView {
	at := func(t time.Time) *time.Time { return &t }
	morning := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC) // 08:00 in Berlin
	nightly := time.Date(2026, 12, 2, 23, 30, 0, 0, time.UTC)
	return api.AgentView{
		Name: "reports", State: "paused", Paused: true, PausedBy: "ops", PausedSince: at(now.Add(-10 * time.Minute)),
		NextWake: &morning, NextWakeCause: "schedule", NextWakeSchedule: "morning",
		NextWakeReason: "schedule morning (skipped: the agent is paused)",
		Schedules: []api.ScheduleView{
			{Name: "morning", NextFire: &morning, Skipped: true, Timezone: "Europe/Berlin", NextFireLocal: "2026-12-03 08:00:00 CET"},
			{Name: "nightly", NextFire: &nightly, Skipped: true},
		},
	}
}

// whenLines is the block's "next wake" and "schedules" lines.
func whenLines(out string) string {
	var keep []string
	in := false
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "next wake:"), strings.HasPrefix(l, "schedules:"):
			in = true
		case !strings.HasPrefix(l, " "):
			in = false
		}
		if in {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// TestStatusBlockSaysEachTimeOnce: the next wake names its schedule once
// (not "schedule morning: schedule morning"), and a fire time reads once
// per zone: a reader in UTC is not told "07:00 UTC" twice, a reader in
// the schedule's zone sees its reading once, and any other reader gets
// UTC as well.
func TestStatusBlockSaysEachTimeOnce(t *testing.T) {
	t.Parallel()
	zone := func(name string) *time.Location {
		loc, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		return loc
	}
	for _, c := range []struct {
		reader *time.Location
		want   string
	}{
		{time.UTC, `
next wake:   in 15h (2026-12-03 07:00:00 UTC), schedule morning (skipped: the agent is paused)
schedules:   morning in 15h (2026-12-03 07:00:00 UTC; 2026-12-03 08:00:00 CET in Europe/Berlin), skipped: the agent is paused
             nightly in 7h30m (2026-12-02 23:30:00 UTC), skipped: the agent is paused`},
		{zone("Europe/Berlin"), `
next wake:   in 15h (2026-12-03 08:00:00 CET), schedule morning (skipped: the agent is paused)
schedules:   morning in 15h (2026-12-03 08:00:00 CET in Europe/Berlin, 07:00 UTC), skipped: the agent is paused
             nightly in 7h30m (2026-12-03 00:30:00 CET, 23:30 UTC), skipped: the agent is paused`},
		{zone("America/New_York"), `
next wake:   in 15h (2026-12-03 02:00:00 EST), schedule morning (skipped: the agent is paused)
schedules:   morning in 15h (2026-12-03 02:00:00 EST; 2026-12-03 08:00:00 CET in Europe/Berlin, 07:00 UTC), skipped: the agent is paused
             nightly in 7h30m (2026-12-02 18:30:00 EST, 23:30 UTC), skipped: the agent is paused`},
	} {
		now := time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC).In(c.reader)
		var out bytes.Buffer
		writeBlock(&out, pausedMorning(now), now)
		if got, want := whenLines(out.String()), strings.TrimPrefix(c.want, "\n"); got != want {
			t.Errorf("reader in %s:\n--- got:\n%s\n--- want:\n%s", c.reader, got, want)
		}
	}
}

// TestWakeTextSaysTheCauseOnce: a reason that repeats the cause adds only
// what follows it; another reason follows a colon.
func TestWakeTextSaysTheCauseOnce(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC)
	next := now.Add(20 * time.Second)
	for _, c := range []struct {
		cause, schedule, reason, want string
	}{
		{"schedule", "morning", "schedule morning", "schedule morning"},
		{"schedule", "morning", "schedule morning (skipped: the agent is halted)", "schedule morning (skipped: the agent is halted)"},
		{"schedule", "morning", "schedule mornings", "schedule morning: schedule mornings"},
		{"retry", "", "retry after failure", "retry after failure"},
		{"heartbeat", "", "heartbeat (sleep.default)", "heartbeat (sleep.default)"},
		{"timer", "", "the wake the model asked for", "timer: the wake the model asked for"},
		{"", "", "", ""},
	} {
		a := api.AgentView{NextWake: &next, NextWakeCause: c.cause, NextWakeSchedule: c.schedule, NextWakeReason: c.reason}
		want := "in 20s (2026-12-02 16:00:20 UTC)"
		if c.want != "" {
			want += ", " + c.want
		}
		if got := wakeText(a, now); got != want {
			t.Errorf("cause %q, reason %q: %q, want %q", c.cause, c.reason, got, want)
		}
	}
}
