package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/agent-worker/agent-worker/access"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/inbox/natsinbox"
	"github.com/agent-worker/agent-worker/natsbus"
)

// DeadLetterStore reads and replays kept dead letters (natsinbox's
// DeadLetters over the dead-letter stream). Every replica shares it.
type DeadLetterStore interface {
	List(ctx context.Context, agent string, limit int) ([]natsinbox.DeadLetter, error)
	Replay(ctx context.Context, agent string, seq uint64) (natsinbox.DeadLetter, error)
}

// Bounds of GET /v1/agents/{name}/dlq?limit=.
const (
	DefaultDeadLetterLimit = 50
	MaxDeadLetterLimit     = 1000
)

// DeadLetterList answers GET /v1/agents/{name}/dlq.
type DeadLetterList struct {
	Agent       string                 `json:"agent"`
	DeadLetters []natsinbox.DeadLetter `json:"dead_letters"`
}

// EventDeadLetterReplayed is the event of a replay: seq, id, reason, by
// and the operator's reason.
const EventDeadLetterReplayed = "dead-letter-replayed"

// deadLetterRoutes list an agent's dead letters (role read) and replay
// one (operate). They are served with or without a store: without one
// they answer 404 (deadLetters).
func (s *Server) deadLetterRoutes() []route {
	return []route{
		readRoute("GET /v1/agents/{name}/dlq", s.listDeadLetters),
		writeRoute("POST /v1/agents/{name}/dlq/{seq}/replay", "dlq-replay", access.Operate, s.replayDeadLetter),
	}
}

// deadLetters returns the request's agent and the dead-letter store, or
// answers: 404 for an unknown agent, and without a store (dead letters are
// not kept without JetStream).
func (s *Server) deadLetters(w http.ResponseWriter, r *http.Request) (string, DeadLetterStore, bool) {
	a, ok := s.agent(w, r)
	if !ok {
		return "", nil, false
	}
	if s.o.DeadLetters == nil {
		fail(w, r, http.StatusNotFound, "dead letters are not kept by this worker (nats.jetstream is false): they are published on the agent's dlq subject only")
		return "", nil, false
	}
	return a.Name(), s.o.DeadLetters, true
}

// listDeadLetters serves GET /v1/agents/{name}/dlq?limit=N (1..1000,
// default 50): the agent's newest kept dead letters, oldest first, each
// with its seq (for replay), id, reason, detail, time, subject and body.
func (s *Server) listDeadLetters(w http.ResponseWriter, r *http.Request) {
	agent, store, ok := s.deadLetters(w, r)
	if !ok {
		return
	}
	limit := DefaultDeadLetterLimit
	if q := r.URL.Query().Get("limit"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 || n > MaxDeadLetterLimit {
			fail(w, r, http.StatusBadRequest, "limit must be an integer from 1 to %d; got %q", MaxDeadLetterLimit, q)
			return
		}
		limit = n
	}
	list, err := store.List(r.Context(), agent, limit)
	if err != nil {
		fail(w, r, http.StatusServiceUnavailable, "dead letters of agent %q: %v", agent, err)
		return
	}
	if list == nil {
		list = []natsinbox.DeadLetter{}
	}
	writeJSON(w, http.StatusOK, DeadLetterList{Agent: agent, DeadLetters: list})
}

// replayDeadLetter serves POST /v1/agents/{name}/dlq/{seq}/replay with an
// optional {"reason"}: the dead letter goes back to the agent's inbox
// subject once (and leaves the dead-letter stream); 404 when there is no
// such dead letter (replayed already, aged out). Audited: a
// dead-letter-replayed event names the token and the reason.
func (s *Server) replayDeadLetter(w http.ResponseWriter, r *http.Request) {
	agent, store, ok := s.deadLetters(w, r)
	if !ok {
		return
	}
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil || seq == 0 {
		fail(w, r, http.StatusBadRequest, "seq must be a dead letter's positive sequence number (GET /v1/agents/%s/dlq lists them); got %q", agent, r.PathValue("seq"))
		return
	}
	reason, ok := s.bodyReason(w, r)
	if !ok {
		return
	}
	dl, err := store.Replay(r.Context(), agent, seq)
	switch {
	case errors.Is(err, natsinbox.ErrNoDeadLetter):
		fail(w, r, http.StatusNotFound, "%v (replayed already, or aged out of the dead-letter stream)", err)
		return
	case errors.Is(err, natsbus.ErrFull):
		w.Header().Set("Retry-After", retryFull)
		fail(w, r, http.StatusInsufficientStorage, "replay: %v", err)
		return
	case err != nil:
		fail(w, r, http.StatusServiceUnavailable, "replay: %v", err)
		return
	}
	who := record(r).who.Name
	if s.o.Events != nil {
		s.o.Events.Publish(events.Event{Time: time.Now(), Agent: agent, Type: EventDeadLetterReplayed,
			Data: map[string]any{"seq": seq, "id": dl.ID, "reason": dl.Reason, "by": who, "why": reason}})
	}
	record(r).result = "dead letter " + strconv.FormatUint(seq, 10) + " replayed to the inbox"
	writeJSON(w, http.StatusOK, map[string]any{"replayed": true, "dead_letter": dl})
}
