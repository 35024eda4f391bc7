package api

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"

	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/natsbus"
	"github.com/agent-worker/agent-worker/tracing"
)

// Message sources of what the API queues (inbox.Message.Source).
const (
	SourceAPI          = "api"
	SourceAlertmanager = "alertmanager"
)

// Why a message or notification was answered duplicate (the "reason" of
// the answer).
const (
	// DuplicateWindow: its id was seen for the agent within the dedup
	// window (Options.DedupWindow, in this process's memory).
	DuplicateWindow = "dedup_window"
	// DuplicateStream: the transport already holds a message with its id
	// (Options.Deliver returned ErrDuplicate: JetStream's duplicate
	// window, nats.duplicate_window).
	DuplicateStream = "stream"
)

// duplicateDetail says each reason in words.
var duplicateDetail = map[string]string{
	DuplicateWindow: "a message with this id was queued for the agent within the dedup window; nothing was queued",
	DuplicateStream: "the stream already holds a message with this id; nothing was queued",
}

// queued is the answer to a message or notification: 202 with status
// "queued", or 200 with status "duplicate" and why.
type queued struct {
	// Status is "queued" or "duplicate".
	Status    string `json:"status"`
	Queued    bool   `json:"queued"`
	ID        string `json:"id"`
	Duplicate bool   `json:"duplicate"`
	// Kind is "inbox" (wakes) or "deferred"; empty for a duplicate.
	Kind string `json:"kind,omitempty"`
	// Reason and Detail say why a duplicate is one: Duplicate* and words.
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Truncated counts the alerts of an Alertmanager notification left
	// out of the queued message to fit it (the message says which).
	Truncated int `json:"truncated,omitempty"`
}

// postMessage serves POST /v1/agents/{name}/messages: {"text", "wake"
// (default true), "id", "from", "attributes"} → 202. An id seen for the
// agent within the dedup window, or already handled by a turn, is answered
// 200 with status "duplicate" and nothing is queued; without an id the
// server makes one up. An id in another route's namespace ("webhook:",
// "alertmanager:", in any case: idspace.go) is 400. A message larger than Options.MaxMessageBytes once
// encoded is answered 413.
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
		Steer      bool              `json:"steer"`
	}
	if !s.decode(w, r, &body, true) {
		return
	}
	text := strings.TrimSpace(body.Text)
	if text == "" {
		fail(w, r, http.StatusBadRequest, `"text" is required and must not be blank`)
		return
	}
	if body.Steer {
		if body.Wake != nil || body.ID != "" || body.From != "" || body.Attributes != nil {
			fail(w, r, http.StatusBadRequest, `a steered message takes "text" only: it is the operator's own words for the running turn, not a queued message`)
			return
		}
		s.steerMessage(w, r, a, text) // steer.go
		return
	}
	kind := inbox.Wake
	if body.Wake != nil && !*body.Wake {
		kind = inbox.Deferred
	}
	id := strings.TrimSpace(body.ID)
	if prefix, owner := reservedPrefix(id); prefix != "" {
		fail(w, r, http.StatusBadRequest, `"id" may not begin with %q: that namespace is reserved for the ids of %s, so that a message cannot take a notification's id; choose another id`, prefix, owner)
		return
	}
	explicit := id != ""
	if !explicit {
		id = "api-" + rand.Text()
	}
	m := inbox.Message{ID: id, Kind: kind, Source: SourceAPI, From: strings.TrimSpace(body.From), Text: text, Attributes: body.Attributes}
	if size, ok := s.fits(m); !ok {
		fail(w, r, http.StatusRequestEntityTooLarge, "the message is %d bytes as queued; the limit is %d (nats.max_message_bytes)", size, s.o.MaxMessageBytes)
		return
	}
	if explicit {
		if dup := s.admit(a.Name(), id); dup != "" {
			s.duplicate(w, r, id, dup)
			return
		}
	}
	if !s.deliver(w, r, a, m) {
		return
	}
	record(r).result = "queued " + string(kind) + " " + id
	writeJSON(w, http.StatusAccepted, queued{Status: "queued", Queued: true, ID: id, Kind: string(kind)})
}

// postAlertmanager serves POST /v1/alertmanager/{name}: one Alertmanager
// webhook notification (version 4) of up to Options.AlertmanagerMaxBytes
// becomes one inbox message, rendered by inbox.ParseAlertmanager with as
// many alerts as fit Options.MaxMessageBytes (the most severe and newest
// kept; the rest counted). A notification with a firing alert wakes the
// agent; an all-resolved one is deferred to the next turn unless the agent
// wakes on resolved. The package documentation has the rules of its id and
// of duplicates.
func (s *Server) postAlertmanager(w http.ResponseWriter, r *http.Request) {
	a, ok := s.agent(w, r)
	if !ok {
		return
	}
	data, ok := s.readBody(w, r, s.o.AlertmanagerMaxBytes, "Alertmanager payload", " (api.alertmanager_max_bytes)")
	if !ok {
		return
	}
	n, err := inbox.ParseAlertmanager(data, func(b inbox.Body) bool {
		_, ok := s.fits(alertMessage(b, b.ID, inbox.Wake))
		return ok
	})
	if rej, isRej := errors.AsType[*inbox.RejectError](err); isRej && rej.Reason == inbox.RejectTooLarge {
		fail(w, r, http.StatusRequestEntityTooLarge, "the notification cannot be cut to fit one message of %d bytes (nats.max_message_bytes): %s", s.o.MaxMessageBytes, rej.Detail)
		return
	}
	if err != nil {
		fail(w, r, http.StatusBadRequest, "not a usable Alertmanager payload: %v", err)
		return
	}
	b := n.Body
	kind := inbox.Wake
	if b.AllResolved && !s.o.ResolvedWakes && !s.webhooks().wakeOnResolved[a.Name()] {
		kind = inbox.Deferred
	}
	id, dup := s.notificationID(a.Name(), n.GroupKey, b.ID)
	if dup != "" {
		s.groups.set(a.Name(), n.GroupKey, groupState{content: b.ID, id: id})
		s.duplicate(w, r, id, dup)
		return
	}
	if !s.deliver(w, r, a, alertMessage(b, id, kind)) {
		return
	}
	s.groups.set(a.Name(), n.GroupKey, groupState{content: b.ID, id: id})
	rec := record(r)
	rec.result = "queued " + string(kind) + " " + id
	if n.Truncated > 0 {
		rec.truncated = n.Truncated
		rec.result += fmt.Sprintf(" (%d of %d alerts left out to fit one message)", n.Truncated, n.Alerts)
	}
	writeJSON(w, http.StatusAccepted, queued{Status: "queued", Queued: true, ID: id, Kind: string(kind), Truncated: n.Truncated})
}

// alertMessage is the message a notification is queued as: attributes
// via=alertmanager, receiver, group_key, status (and alertname,
// truncated), and Via so the agent wakes with source alertmanager.
func alertMessage(b inbox.Body, id string, kind inbox.Kind) inbox.Message {
	attrs := maps.Clone(b.Attributes)
	if attrs == nil {
		attrs = map[string]string{}
	}
	attrs["via"] = SourceAlertmanager
	return inbox.Message{ID: id, Kind: kind, Source: SourceAlertmanager, Via: inbox.ViaAlertmanager,
		From: b.From, Text: b.Text, Attributes: attrs}
}

// notificationID decides a notification's id and whether it is a
// duplicate ("" when new). content is the id its content derives. The
// group's current state again (a retry, a repeat) keeps the id it was
// given. A state the group had before but not last — it went back, an
// alert firing again with its old startsAt — is new, under an id derived
// from content and the last state's id.
func (s *Server) notificationID(agent, groupKey, content string) (string, string) {
	last, known := s.groups.last(agent, groupKey)
	if known && last.content == content {
		return last.id, s.admit(agent, last.id)
	}
	dup := s.admit(agent, content)
	if dup == "" || !known {
		return content, dup
	}
	id := returnID(content, last.id)
	return id, s.admit(agent, id)
}

// returnID is the id of a notification whose content id is content, sent
// when the group's last notification had id last: the same length as a
// content id, and new however often the group flaps between two states
// (each return follows another id).
func returnID(content, last string) string {
	h := sha256.New()
	for _, f := range []string{"return", content, last} {
		_, _ = io.WriteString(h, strconv.Itoa(len(f))+":"+f)
	}
	return idPrefixAlertmanager + hex.EncodeToString(h.Sum(nil))[:16]
}

// admit decides whether id is new for agent: it is a duplicate
// (DuplicateWindow) when seen within the dedup window — and is recorded
// there now otherwise. It returns "" when new. (The stream's duplicate
// window catches a retry this replica did not see: DuplicateStream.)
func (s *Server) admit(agent, id string) string {
	if !s.seen.first(agent, id) {
		return DuplicateWindow
	}
	return ""
}

// fits reports m's size as queued and whether it is within
// MaxMessageBytes.
func (s *Server) fits(m inbox.Message) (int, bool) {
	data, err := EncodeMessage(m)
	if err != nil {
		return 0, false
	}
	return len(data), len(data) <= s.o.MaxMessageBytes
}

// deliver queues m for a, as sent by the request's caller (m.Sender:
// sender, the credential's name): through Options.Deliver (durably, to whichever
// replica owns the agent) when set, else into a's inbox here. It reports
// whether m was queued; when not, the answer is written: duplicate when
// the transport already held m, 507 when the input stream refused it for
// a bound (natsbus.ErrFull: the agent's backlog or the stream is full),
// else 503 — and m's id is forgotten, so the sender's retry is not taken
// for a duplicate.

// retryFull is the Retry-After of a 507: a full backlog drains at the
// agent's pace.
const retryFull = "30"

func (s *Server) deliver(w http.ResponseWriter, r *http.Request, a *driver.Agent, m inbox.Message) bool {
	if tp := r.Header.Get(tracing.HeaderTraceParent); tracing.Valid(tp) {
		m.TraceParent = tp // the turn that drains m links to the sender's trace
	}
	m.Sender = sender(record(r).who) // the credential's name, whatever the body's "from" says
	if s.o.Deliver == nil {
		a.Send(m)
		return true
	}
	err := s.o.Deliver(r.Context(), a.Name(), m)
	switch {
	case err == nil:
		return true
	case errors.Is(err, ErrDuplicate):
		s.duplicate(w, r, m.ID, DuplicateStream)
		return false
	case errors.Is(err, natsbus.ErrFull):
		// The agent's backlog (or the whole input stream) is at its bound:
		// nothing was queued, and nothing waiting was dropped for it.
		s.seen.forget(a.Name(), m.ID)
		w.Header().Set("Retry-After", retryFull)
		fail(w, r, http.StatusInsufficientStorage, "could not queue the message: %v", err)
		return false
	}
	s.seen.forget(a.Name(), m.ID)
	w.Header().Set("Retry-After", "5")
	fail(w, r, http.StatusServiceUnavailable, "could not queue the message: %v", err)
	return false
}

func (s *Server) duplicate(w http.ResponseWriter, r *http.Request, id, reason string) {
	record(r).result = "duplicate " + id + " (" + reason + ")"
	writeJSON(w, http.StatusOK, queued{Status: "duplicate", Queued: false, ID: id, Duplicate: true, Reason: reason, Detail: duplicateDetail[reason]})
}

// EncodeMessage is the body a message that arrived over HTTP is published
// with (the worker's Options.Deliver): a JSON envelope {"text", "id",
// "from", "attributes"} that inbox.ParseBody reads back as m's Text, ID,
// From and Attributes, with the attribute via set to m.Source and From
// defaulting to m.Source. Options.MaxMessageBytes bounds its length.
func EncodeMessage(m inbox.Message) ([]byte, error) {
	attrs := maps.Clone(m.Attributes)
	if attrs == nil {
		attrs = map[string]string{}
	}
	attrs["via"] = m.Source
	from := m.From
	if from == "" {
		from = m.Source
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // "<" stays one byte, so the size is the text's
	err := enc.Encode(struct {
		Text       string            `json:"text"`
		ID         string            `json:"id"`
		From       string            `json:"from"`
		Attributes map[string]string `json:"attributes"`
	}{m.Text, m.ID, from, attrs})
	if err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
