package api

import (
	"crypto/rand"
	"net/http"
	"strings"

	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/inbox"
)

// Message sources of what the API queues (inbox.Message.Source).
const (
	SourceAPI          = "api"
	SourceAlertmanager = "alertmanager"
)

// queued is the answer to a message or notification.
type queued struct {
	Queued    bool   `json:"queued"`
	ID        string `json:"id"`
	Duplicate bool   `json:"duplicate"`
	// Kind is "inbox" (wakes) or "deferred"; empty for a duplicate.
	Kind string `json:"kind,omitempty"`
}

// postMessage serves POST /v1/agents/{name}/messages: {"text", "wake"
// (default true), "id", "from", "attributes"} → 202. An id seen for the
// agent within the dedup window is answered 200 with duplicate true and
// nothing is queued; without an id the server makes one up.
func (s *Server) postMessage(w http.ResponseWriter, r *http.Request) {
	a, ok := s.agent(w, r)
	if !ok {
		return
	}
	var body struct {
		Text       string            `json:"text"`
		Wake       *bool             `json:"wake"`
		ID         string            `json:"id"`
		From       string            `json:"from"`
		Attributes map[string]string `json:"attributes"`
	}
	if !s.decode(w, r, &body, true) {
		return
	}
	text := strings.TrimSpace(body.Text)
	if text == "" {
		fail(w, r, http.StatusBadRequest, `"text" is required and must not be blank`)
		return
	}
	kind := inbox.Wake
	if body.Wake != nil && !*body.Wake {
		kind = inbox.Deferred
	}
	id := strings.TrimSpace(body.ID)
	if id == "" {
		id = "api-" + rand.Text()
	} else if !s.seen.first(a.Name(), id) {
		s.duplicate(w, r, id)
		return
	}
	if !s.deliver(w, r, a, inbox.Message{ID: id, Kind: kind, Source: SourceAPI, From: strings.TrimSpace(body.From), Text: text, Attributes: body.Attributes}) {
		return
	}
	record(r).result = "queued " + string(kind) + " " + id
	writeJSON(w, http.StatusAccepted, queued{Queued: true, ID: id, Kind: string(kind)})
}

// postAlertmanager serves POST /v1/alertmanager/{name}: one Alertmanager
// webhook notification (version 4) becomes one inbox message, rendered by
// inbox.ParseBody. A notification with a firing alert wakes the agent; an
// all-resolved one is deferred to the next turn unless ResolvedWakes.
// Retries of a notification share its id and are answered duplicate
// within the dedup window, so they cause no extra turn.
func (s *Server) postAlertmanager(w http.ResponseWriter, r *http.Request) {
	a, ok := s.agent(w, r)
	if !ok {
		return
	}
	data, ok := s.readBody(w, r)
	if !ok {
		return
	}
	b, err := inbox.ParseBody(data, int(s.o.MaxBody))
	if err != nil {
		fail(w, r, http.StatusBadRequest, "not a usable Alertmanager payload: %v", err)
		return
	}
	if b.Format != inbox.FormatAlertmanager {
		fail(w, r, http.StatusBadRequest, `not an Alertmanager webhook payload: want a JSON object with "status" and "alerts" (webhook version 4)`)
		return
	}
	if b.ID != "" && !s.seen.first(a.Name(), b.ID) {
		s.duplicate(w, r, b.ID)
		return
	}
	kind := inbox.Wake
	if b.AllResolved && !s.o.ResolvedWakes {
		kind = inbox.Deferred
	}
	if !s.deliver(w, r, a, inbox.Message{ID: b.ID, Kind: kind, Source: SourceAlertmanager, From: b.From, Text: b.Text, Attributes: b.Attributes}) {
		return
	}
	record(r).result = "queued " + string(kind) + " " + b.ID
	writeJSON(w, http.StatusAccepted, queued{Queued: true, ID: b.ID, Kind: string(kind)})
}

// deliver queues m for a: through Options.Deliver (durably, to whichever
// replica owns the agent) when set, else into a's inbox here. A failure is
// answered 503 and reported false.
func (s *Server) deliver(w http.ResponseWriter, r *http.Request, a *driver.Agent, m inbox.Message) bool {
	if s.o.Deliver == nil {
		a.Send(m)
		return true
	}
	if err := s.o.Deliver(r.Context(), a.Name(), m); err != nil {
		w.Header().Set("Retry-After", "5")
		fail(w, r, http.StatusServiceUnavailable, "could not queue the message: %v", err)
		return false
	}
	return true
}

func (s *Server) duplicate(w http.ResponseWriter, r *http.Request, id string) {
	record(r).result = "duplicate " + id
	writeJSON(w, http.StatusOK, queued{Queued: false, ID: id, Duplicate: true})
}
