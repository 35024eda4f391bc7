package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/internal/textclip"
	"github.com/agent-worker/agent-worker/turnlog"
)

// Statuses of GET /v1/agents/{name}/messages/{id}.
const (
	// MessageQueued: waiting in the agent's inbox on its owner.
	MessageQueued = driver.MessageQueued
	// MessageRunning: taken by the turn running now (turn.n).
	MessageRunning = driver.MessageRunning
	// MessageHandled: a completed turn handled it (turn.n, with the
	// turn's outcome and final text while the turn log holds it).
	MessageHandled = driver.MessageHandled
	// MessageDeadLettered: rejected or dropped; dead_letter says why.
	MessageDeadLettered = "dead_lettered"
	// MessageUnknown: nobody knows the id (answered 404).
	MessageUnknown = driver.MessageUnknown
)

// MessageInfo is the answer of GET /v1/agents/{name}/messages/{id}.
type MessageInfo struct {
	Agent  string `json:"agent"`
	ID     string `json:"id"`
	Status string `json:"status"`
	// Owner names the replica whose memory was asked (the agent's owner);
	// ServedBy the replica that answered.
	Owner    string `json:"owner,omitempty"`
	ServedBy string `json:"served_by,omitempty"`
	// Kind, Source, Sender, Received and Attempts describe a queued or
	// running message. Sender is who the worker authenticated as its
	// sender ("api, token ops"; absent for a message published on NATS).
	Kind     string     `json:"kind,omitempty"`
	Source   string     `json:"source,omitempty"`
	Sender   string     `json:"sender,omitempty"`
	Received *time.Time `json:"received,omitempty"`
	Attempts int        `json:"attempts,omitempty"`
	// Turn is the turn running or that handled the message.
	Turn *MessageTurn `json:"turn,omitempty"`
	// HandledAt is when the turn that handled the message ended, as the
	// turn log tells it.
	HandledAt *time.Time `json:"handled_at,omitempty"`
	// DeadLetter says why a dead-lettered message was refused or dropped.
	DeadLetter *turnlog.DeadLetter `json:"dead_letter,omitempty"`
	// OwnerError says why the owner's memory could not be asked; the
	// answer then comes from the store alone.
	OwnerError string `json:"owner_error,omitempty"`
	// Error says, on a 404, what was looked at.
	Error string `json:"error,omitempty"`
}

// MessageTurn is the turn of a running or handled message. Recorded says
// whether the turn log still holds the turn's summary; the other fields
// come from it.
type MessageTurn struct {
	N               uint64     `json:"n"`
	Recorded        bool       `json:"recorded"`
	Outcome         string     `json:"outcome,omitempty"`
	Started         *time.Time `json:"started,omitempty"`
	DurationSeconds float64    `json:"duration_seconds,omitempty"`
	CostUSD         float64    `json:"cost_usd,omitempty"`
	// Text is the turn's final text, cut to MaxTurnText runes.
	Text string `json:"text,omitempty"`
}

// getMessage serves GET /v1/agents/{name}/messages/{id}: what became of
// the message with that id (the id a 202 answered, a Nats-Msg-Id, an
// envelope "id", or "<stream>-seq-<n>" for a NATS message that had none).
// It asks, in order:
//
//  1. the agent's owner (control verb message, forwarded to whichever
//     replica owns the agent): queued, running in turn N, or handled by a
//     turn of its history window;
//  2. the store, from any replica: the turn log's summaries (their first
//     turnlog.MaxMessages ids: the turn that handled it) and the
//     dead-letter record (reason, detail, subject) — the newer wins when
//     a message met both (a replayed dead letter).
//
// A handled message's turn comes with its outcome and final text from the
// turn log. Answers: 200 for queued, running, handled and dead_lettered;
// 404 {"status":"unknown","error"} when none knows the id; 503 when the
// owner could not be asked and the store does not know the id either (it
// may be queued there), or the store cannot be read.
//
// Not guaranteed: a message still in the input log, not yet read by the
// owner (its inbox at its cap), is unknown until it is read; the turn log
// keeps the newest turns only (turnlog.Keep), dead-letter records a day;
// records are written just after the fact, so a message may read unknown
// for a moment between leaving the owner's memory and its record landing.
func (s *Server) getMessage(w http.ResponseWriter, r *http.Request) {
	a, ok := s.agent(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	info := MessageInfo{Agent: a.Name(), ID: id, Status: MessageUnknown, ServedBy: s.o.Holder}
	st := driver.MessageState{Status: driver.MessageUnknown}
	reply, err := s.ctl.Do(r.Context(), a.Name(), control.Request{Verb: control.VerbMessage, MessageID: id, By: record(r).who.Name})
	switch {
	case err != nil:
		info.OwnerError = err.Error()
	case !reply.OK:
		info.OwnerError = reply.Error
	default:
		info.Owner = reply.Owner
		if err := json.Unmarshal(reply.Result, &st); err != nil {
			info.OwnerError = fmt.Sprintf("the owner %q sent no message state: %v", reply.Owner, err)
		}
	}
	switch st.Status {
	case driver.MessageQueued, driver.MessageRunning:
		info.Status, info.Kind, info.Source, info.Sender, info.Received, info.Attempts = st.Status, st.Kind, st.Source, st.Sender, st.Received, st.Attempts
		if st.Status == driver.MessageRunning {
			info.Turn = &MessageTurn{N: st.Turn}
		}
		writeJSON(w, http.StatusOK, info)
		return
	}
	log := s.driver.TurnLog()
	if st.Status == driver.MessageHandled {
		info.Status, info.Turn = MessageHandled, &MessageTurn{N: st.Turn}
		if t, found, err := log.Find(r.Context(), a.Name(), st.Turn); err == nil && found {
			info.Turn = turnOf(t)
		}
		writeJSON(w, http.StatusOK, info)
		return
	}
	dl, derr := log.DeadLettered(r.Context(), a.Name(), id)
	t, handled, terr := log.FindMessage(r.Context(), a.Name(), id)
	switch {
	case handled && (dl == nil || t.Started.After(dl.At)):
		// Handled, and after any dead letter of it (a replay).
		info.Status, info.Turn = MessageHandled, turnOf(t)
		end := t.Started.Add(time.Duration(t.DurationSeconds * float64(time.Second)))
		info.HandledAt = &end
	case dl != nil:
		info.Status, info.DeadLetter = MessageDeadLettered, dl
	case derr != nil || terr != nil:
		w.Header().Set("Retry-After", retryAfter)
		fail(w, r, http.StatusServiceUnavailable, "message %q of agent %q cannot be looked up: %v", logSafe(id), a.Name(), errors.Join(derr, terr))
		return
	}
	switch {
	case info.Status != MessageUnknown:
		writeJSON(w, http.StatusOK, info)
	case info.OwnerError != "":
		w.Header().Set("Retry-After", retryAfter)
		fail(w, r, http.StatusServiceUnavailable, "message %q of agent %q: its owner could not be asked (%s) and the store does not know it", logSafe(id), a.Name(), info.OwnerError)
	default:
		info.Error = fmt.Sprintf("agent %q has no message %q: not queued or running on its owner, not handled by a recorded turn, not dead-lettered (records are kept a day)", a.Name(), logSafe(id))
		record(r).result = info.Error
		writeJSON(w, http.StatusNotFound, info)
	}
}

// turnOf is the MessageTurn of a recorded turn.
func turnOf(t turnlog.Turn) *MessageTurn {
	started := t.Started
	return &MessageTurn{N: t.N, Recorded: true, Outcome: t.Outcome, Started: &started, DurationSeconds: t.DurationSeconds,
		CostUSD: t.CostUSD, Text: textclip.RunesWithin(t.Text, MaxTurnText, "…")}
}
