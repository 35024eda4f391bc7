package tools

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/adk/tool"
	"google.golang.org/adk/tool/functiontool"
)

// ScheduleArgs are schedule_next_turn's arguments: exactly one of
// WakeInSeconds and WakeAt.
type ScheduleArgs struct {
	WakeInSeconds *float64 `json:"wake_in_seconds,omitempty" jsonschema:"seconds from now until the next turn; give this or wake_at"`
	WakeAt        string   `json:"wake_at,omitempty" jsonschema:"RFC 3339 time of the next turn, e.g. 2026-11-30T08:00:00Z; give this or wake_in_seconds"`
	Reason        string   `json:"reason,omitempty" jsonschema:"why you want to wake then (shown to operators)"`
}

// ScheduleResult is what the model is told.
type ScheduleResult struct {
	WakeAt string `json:"wake_at"`
	// Clamped is true when the request was moved into the agent's
	// [min, max] sleep bounds; Note then says how.
	Clamped bool   `json:"clamped"`
	Note    string `json:"note,omitempty"`
}

func newScheduleNextTurn(host Host, sleep Sleep) (tool.Tool, error) {
	desc := "Ask to be woken for another turn later. Without it you sleep until a new message or schedule wakes you. " +
		fmt.Sprintf("Requests are kept within %s.", bounds(sleep))
	return newTool(functiontool.Config{Name: ScheduleNextTurn, Description: desc},
		func(_ tool.Context, a ScheduleArgs) (ScheduleResult, error) {
			now := host.Now()
			var want time.Time
			switch {
			case a.WakeInSeconds != nil && a.WakeAt != "":
				return ScheduleResult{}, fmt.Errorf("give wake_in_seconds or wake_at, not both")
			case a.WakeInSeconds != nil:
				want = now.Add(time.Duration(*a.WakeInSeconds * float64(time.Second)))
			case a.WakeAt != "":
				t, err := time.Parse(time.RFC3339, a.WakeAt)
				if err != nil {
					return ScheduleResult{}, fmt.Errorf("wake_at %q is not an RFC 3339 time such as 2026-11-30T08:00:00Z", a.WakeAt)
				}
				want = t
			default:
				return ScheduleResult{}, fmt.Errorf("give wake_in_seconds or wake_at")
			}
			at, note := Clamp(now, want, sleep)
			host.RequestWake(at, a.Reason)
			return ScheduleResult{WakeAt: at.UTC().Format(time.RFC3339), Clamped: note != "", Note: note}, nil
		})
}

// Clamp moves want into [now+min, now+max] and, when it had to, says so in
// words meant for the model.
func Clamp(now, want time.Time, s Sleep) (time.Time, string) {
	d := want.Sub(now)
	switch {
	case d < s.Min:
		return now.Add(s.Min), fmt.Sprintf("requested wake in %s is below this agent's minimum sleep of %s; clamped to %s", human(d), s.Min, s.Min)
	case s.Max > 0 && d > s.Max:
		return now.Add(s.Max), fmt.Sprintf("requested wake in %s is beyond this agent's maximum sleep of %s; clamped to %s", human(d), s.Max, s.Max)
	}
	return want, ""
}

func human(d time.Duration) string {
	if d < 0 {
		return "the past (" + (-d).Round(time.Second).String() + " ago)"
	}
	return d.Round(time.Second).String()
}

func bounds(s Sleep) string {
	var parts []string
	parts = append(parts, "at least "+s.Min.String())
	if s.Max > 0 {
		parts = append(parts, "at most "+s.Max.String())
	}
	return strings.Join(parts, " and ") + " from now"
}
