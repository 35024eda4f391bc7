package main

import (
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/guard"
)

// A daily trip says in the status block when it lifts by itself; a
// session trip, which only a reset lifts, does not.
func TestStatusBlockSaysWhenADailyTripLifts(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 18, 48, 0, 0, time.UTC) // 19:48 in Berlin
	lifts := time.Date(2026, 12, 3, 0, 0, 0, 0, time.FixedZone("CET", 3600))
	view := func(guardrail string, lifts *time.Time) api.AgentView {
		return api.AgentView{Name: "oncall", State: "halted", Guardrails: &guard.Status{
			Priced: true, Timezone: "Europe/Berlin", TripLiftsAt: lifts,
			Trip: &guard.Trip{Guardrail: guardrail, At: now.Add(-time.Hour), Reason: "spend today reached the ceiling"},
		}}
	}
	var b strings.Builder
	writeBlock(&b, view(guard.Daily, &lifts), now)
	if want := "halted until midnight in Europe/Berlin (in 4h12m)"; !strings.Contains(b.String(), want) {
		t.Fatalf("a daily trip's block lacks %q:\n%s", want, b.String())
	}
	b.Reset()
	writeBlock(&b, view(guard.Session, nil), now)
	if strings.Contains(b.String(), "halted until") {
		t.Fatalf("a session trip's block names a lift time:\n%s", b.String())
	}
}
