package api

import (
	"net/http"
	"strconv"

	"github.com/agent-worker/agent-worker/turnlog"
)

// Bounds of GET /v1/agents/{name}/turns?limit=.
const (
	// DefaultTurnsLimit is how many turns are listed without a limit.
	DefaultTurnsLimit = 10
	// MaxTurnsLimit is the largest limit: every turn the store keeps per
	// agent (turnlog.Keep).
	MaxTurnsLimit = turnlog.Keep
)

// TurnList is the answer of GET /v1/agents/{name}/turns: the agent's
// newest turns, newest first, completed or not (turnlog.Turn: number,
// start, duration, outcome and error, wakes, messages with their ids and
// sources, tool calls with clipped arguments and outcomes, model calls,
// tokens, cost, final text).
type TurnList struct {
	Agent string         `json:"agent"`
	Turns []turnlog.Turn `json:"turns"`
}

// listTurns serves GET /v1/agents/{name}/turns?limit=N (1..MaxTurnsLimit,
// default DefaultTurnsLimit; anything else is 400). The turns come from
// the store, where only the agent's owner writes them, so every replica
// answers alike; a turn is listed once its summary is written, which
// follows the turn's end in the background (normally within
// milliseconds). 503 when the store cannot be read.
func (s *Server) listTurns(w http.ResponseWriter, r *http.Request) {
	a, ok := s.agent(w, r)
	if !ok {
		return
	}
	limit := DefaultTurnsLimit
	if q := r.URL.Query(); q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 1 || n > MaxTurnsLimit {
			fail(w, r, http.StatusBadRequest, "limit must be a whole number from 1 to %d, got %q", MaxTurnsLimit, logSafe(q.Get("limit")))
			return
		}
		limit = n
	}
	turns, err := s.driver.TurnLog().Recent(r.Context(), a.Name(), limit)
	if err != nil {
		w.Header().Set("Retry-After", retryAfter)
		fail(w, r, http.StatusServiceUnavailable, "the turns of agent %q cannot be read: %v", a.Name(), err)
		return
	}
	writeJSON(w, http.StatusOK, TurnList{Agent: a.Name(), Turns: turns})
}
