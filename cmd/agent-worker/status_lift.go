package main

import (
	"time"

	"github.com/agent-worker/agent-worker/guard"
)

// liftText says when the agent's trip lifts by itself — "halted until
// midnight in Europe/Berlin (in 4h12m)" for a daily trip — or "" when only
// a reset lifts it (and without a trip).
func liftText(g *guard.Status, now time.Time) string {
	if g == nil || g.Trip == nil || g.TripLiftsAt == nil {
		return ""
	}
	return "halted until midnight in " + g.Timezone + " (" + relTime(*g.TripLiftsAt, now) + ")"
}
