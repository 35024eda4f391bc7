package api

import (
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/guard"
)

// The page's trip cell says when a daily trip lifts by itself, and
// nothing of the kind for a session trip.
func TestPageSaysWhenADailyTripLifts(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 18, 48, 0, 0, time.UTC)
	lifts := time.Date(2026, 12, 3, 0, 0, 0, 0, time.FixedZone("CET", 3600))
	row := pageRowOf(AgentView{Name: "oncall", State: "halted", Guardrails: &guard.Status{
		Priced: true, Timezone: "Europe/Berlin", TripLiftsAt: &lifts,
		Trip: &guard.Trip{Guardrail: guard.Daily, Reason: "spend today reached the ceiling"},
	}}, now)
	if want := "daily_usd: spend today reached the ceiling; halted until midnight in Europe/Berlin (in 4h12m)"; row.Trip != want {
		t.Fatalf("trip cell %q, want %q", row.Trip, want)
	}
	row = pageRowOf(AgentView{Name: "oncall", State: "halted", Guardrails: &guard.Status{
		Priced: true, Timezone: "Europe/Berlin",
		Trip: &guard.Trip{Guardrail: guard.Session, Reason: "session spend reached the ceiling"},
	}}, now)
	if strings.Contains(row.Trip, "halted until") {
		t.Fatalf("a session trip's cell names a lift time: %q", row.Trip)
	}
}
