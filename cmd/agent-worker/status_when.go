package main

import (
	"strings"
	"time"

	"github.com/agent-worker/agent-worker/api"
)

// The status block says when things happen in the reader's zone (the
// location of the now it is given), and each time and each cause once.

// absTime writes t in loc, to the second.
func absTime(t time.Time, loc *time.Location) string {
	return t.In(loc).Format("2006-01-02 15:04:05 MST")
}

// wakeText writes the next wake: when, then its cause and reason. A
// reason that begins with the cause ("schedule morning (skipped: the
// agent is paused)" after "schedule morning") adds only what follows it,
// so nothing is said twice. a.NextWake must not be nil.
func wakeText(a api.AgentView, now time.Time) string {
	s := relTime(*a.NextWake, now) + " (" + absTime(*a.NextWake, now.Location()) + ")"
	cause := a.NextWakeCause
	if a.NextWakeSchedule != "" {
		cause += " " + a.NextWakeSchedule
	}
	if cause != "" {
		s += ", " + cause
	}
	reason := a.NextWakeReason
	if rest, ok := strings.CutPrefix(reason, cause); ok && cause != "" && (rest == "" || rest[0] == ' ') {
		return s + rest
	}
	if reason != "" {
		s += ": " + reason
	}
	return s
}

// fireText writes when schedule s fires next (its NextFire, not nil),
// each clock reading once: in the reader's zone (now's), in the
// schedule's own zone when that reads differently ("; 2026-12-03
// 08:00:00 CET in Europe/Berlin", else the first reading names the
// zone), and in UTC when neither reading is UTC.
func fireText(s api.ScheduleView, now time.Time) string {
	at := *s.NextFire
	local := absTime(at, now.Location())
	v := s.Name + " " + relTime(at, now) + " (" + local
	utcShown := isUTC(at.In(now.Location()))
	switch {
	case s.NextFireLocal == "":
	case s.NextFireLocal == local:
		v += " in " + s.Timezone
	default:
		v += "; " + s.NextFireLocal + " in " + s.Timezone
		utcShown = utcShown || strings.HasSuffix(s.NextFireLocal, " UTC")
	}
	if !utcShown {
		v += ", " + at.UTC().Format("15:04 UTC")
	}
	return v + ")"
}

// isUTC reports whether t reads as UTC does: its zone's offset is 0.
func isUTC(t time.Time) bool {
	_, off := t.Zone()
	return off == 0
}
