package api

import (
	"strings"
	"time"

	"github.com/agent-worker/agent-worker/guard"
)

// pageLift says on the page when the agent's trip lifts by itself —
// "halted until midnight in Europe/Berlin (in 4h12m)" for a daily trip —
// or "" when only a reset lifts it (and without a trip). The CLI's
// status block says the same.
func pageLift(g *guard.Status, now time.Time) string {
	if g == nil || g.Trip == nil || g.TripLiftsAt == nil {
		return ""
	}
	in := "under a minute"
	if d := g.TripLiftsAt.Sub(now).Round(time.Minute); d >= time.Minute {
		in = strings.TrimSuffix(d.String(), "0s")
	}
	return "halted until midnight in " + g.Timezone + " (in " + in + ")"
}
