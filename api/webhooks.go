package api

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"

	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/internal/textclip"
	"github.com/agent-worker/agent-worker/webhook"
)

// SourceWebhook is inbox.Message.Source of what a generic webhook queues
// (the message's attribute via is "webhook", and webhook names it).
const SourceWebhook = "webhook"

// Formats of a webhook's body (Webhook.Format; webhooks.<name>.format).
const (
	// WebhookJSON: any JSON value, rendered by the webhook's text
	// template.
	WebhookJSON = "json"
	// WebhookGrafana: Grafana's unified alerting webhook, rendered by
	// inbox.ParseGrafana unless a text template is set.
	WebhookGrafana = "grafana"
	// WebhookAlertmanager: an Alertmanager webhook (version 4), rendered
	// by inbox.ParseAlertmanager unless a text template is set.
	WebhookAlertmanager = "alertmanager"
)

// OutcomeTemplateError: a webhook's template failed on the body (422);
// reported to the Observer's WebhookNotification besides the outcomes
// the Alertmanager receiver has.
const OutcomeTemplateError = "template_error"

// webhookRoute is the generic webhooks' route pattern.
const webhookRoute = "POST /v1/webhooks/{name}"

// Webhook is one generic webhook (config webhooks.<name>), served at POST
// /v1/webhooks/<name>: each body becomes one message for Agent.
type Webhook struct {
	// Agent is the agent the messages are for; New refuses one the driver
	// does not have.
	Agent string
	// Format is WebhookJSON (the default when ""), WebhookGrafana or
	// WebhookAlertmanager.
	Format string
	// Text is a webhook.Parse template over the decoded body: the message
	// text. Required for WebhookJSON; for the other formats it replaces
	// the built-in rendering.
	Text string
	// ID is a webhook.Parse template over the decoded body: the message
	// id (trimmed, on one line). Empty: a hash of the body for
	// WebhookJSON, the Alertmanager receiver's id for the other formats.
	ID string
	// Deferred queues the messages for the next turn instead of waking
	// the agent.
	Deferred bool
}

// hook is a Webhook ready to serve: its templates parsed.
type hook struct {
	name string
	Webhook
	text, id *webhook.Template // nil when not set
}

// maxWebhookID bounds an id a template renders, in bytes: a longer one
// is replaced by its hash, so that any template yields a usable id.
const maxWebhookID = 128

// newHooks checks and parses the webhooks of New's Options.
func newHooks(d *driver.Driver, hooks map[string]Webhook) (map[string]*hook, error) {
	out := make(map[string]*hook, len(hooks))
	for name, wh := range hooks {
		if wh.Format == "" {
			wh.Format = WebhookJSON
		}
		switch wh.Format {
		case WebhookJSON, WebhookGrafana, WebhookAlertmanager:
		default:
			return nil, fmt.Errorf("webhook %q: unknown format %q", name, wh.Format)
		}
		if _, err := d.Agent(wh.Agent); err != nil {
			return nil, fmt.Errorf("webhook %q: %w", name, err)
		}
		h := &hook{name: name, Webhook: wh}
		var err error
		if wh.Text != "" {
			if h.text, err = webhook.Parse("webhooks."+name+".text", wh.Text); err != nil {
				return nil, err
			}
		} else if wh.Format == WebhookJSON {
			return nil, fmt.Errorf("webhook %q: format json needs a text template", name)
		}
		if wh.ID != "" {
			if h.id, err = webhook.Parse("webhooks."+name+".id", wh.ID); err != nil {
				return nil, err
			}
		}
		out[name] = h
	}
	return out, nil
}

// webhookAnswer is the 202 of a webhook: the queued answer, the webhook's
// name, and how many bytes of a rendered text were cut to fit one
// message.
type webhookAnswer struct {
	queued
	Webhook        string `json:"webhook"`
	TruncatedBytes int    `json:"truncated_bytes,omitempty"`
}

// postWebhook serves POST /v1/webhooks/{name}: the body (at most
// Options.AlertmanagerMaxBytes) becomes one message for the webhook's
// agent, rendered by its format and templates and cut to fit
// Options.MaxMessageBytes, deduplicated per agent by its id and queued
// through Options.Deliver like every message. Answers: 202 queued, 200
// duplicate, 404 unknown webhook — and the same 404 for a webhook whose
// agent is outside the token's scope, so such a token cannot tell which
// names exist —, 400 a body that is not JSON (or not the format's payload), 413 a body
// over the limit or a notification that cannot be cut to fit, 422 a
// template that fails on the body.
func (s *Server) postWebhook(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	rec := record(r)
	rec.webhooks = s.webhooks() // this request's table to its end
	h, ok := rec.webhooks.hooks[name]
	if !ok {
		fail(w, r, http.StatusNotFound, "unknown webhook %q", name)
		return
	}
	rec.agent = h.Agent
	if !rec.who.MayAccess(h.Agent) {
		// The very answer an unknown webhook gets: a token scoped to other
		// agents cannot tell which webhook names exist. The write log says
		// why.
		fail(w, r, http.StatusNotFound, "unknown webhook %q", name)
		rec.result += fmt.Sprintf(" (it is agent %q's, outside token %q's agents)", h.Agent, rec.who.Name)
		return
	}
	a, err := s.driver.Agent(h.Agent)
	if err != nil {
		fail(w, r, http.StatusNotFound, "webhook %q: unknown agent %q", name, h.Agent)
		return
	}
	data, ok := s.readBody(w, r, s.o.AlertmanagerMaxBytes, "webhook body", " (api.alertmanager_max_bytes)")
	if !ok {
		return
	}
	m, groupKey, werr := s.renderWebhook(h, rec.webhooks.wakeOnResolved[h.Agent], data)
	if werr != nil {
		fail(w, r, werr.status, "%s", werr.msg)
		return
	}
	id, dup := m.ID, ""
	if groupKey != "" {
		id, dup = s.notificationID(a.Name(), groupKey, m.ID)
	} else {
		dup = s.admit(a.Name(), id)
	}
	if dup != "" {
		if groupKey != "" {
			s.groups.set(a.Name(), groupKey, groupState{content: m.ID, id: id})
		}
		s.duplicate(w, r, id, dup)
		return
	}
	content := m.ID
	m.ID = id
	if !s.deliver(w, r, a, m) {
		return
	}
	if groupKey != "" {
		s.groups.set(a.Name(), groupKey, groupState{content: content, id: id})
	}
	answer := webhookAnswer{queued: queued{Status: "queued", Queued: true, ID: id, Kind: string(m.Kind)}, Webhook: name}
	rec.result = "queued " + string(m.Kind) + " " + id + " from webhook " + name
	if n, _ := strconv.Atoi(m.Attributes[inbox.AttrTruncated]); n > 0 {
		answer.Truncated, rec.truncated = n, n
		rec.result += fmt.Sprintf(" (%d alerts left out to fit one message)", n)
	}
	if n, _ := strconv.Atoi(m.Attributes[attrTruncatedBytes]); n > 0 {
		answer.TruncatedBytes, rec.truncated = n, n
		rec.result += fmt.Sprintf(" (%d bytes of text cut to fit one message)", n)
	}
	writeJSON(w, http.StatusAccepted, answer)
}

// webhookError is a refusal of a body: its status and why.
type webhookError struct {
	status int
	msg    string
}

func refuse(status int, format string, args ...any) *webhookError {
	return &webhookError{status: status, msg: fmt.Sprintf(format, args...)}
}

// attrTruncatedBytes is the attribute of a webhook message whose rendered
// text was cut to fit: the bytes cut.
const attrTruncatedBytes = "truncated_bytes"

// renderWebhook makes the message a body becomes: its text, the id its
// content derives (or the id template's), its kind and attributes,
// within MaxMessageBytes; an all-resolved Grafana or Alertmanager
// notification wakes the agent when wakeOnResolved. groupKey is the key of the notification's group
// for the Alertmanager receiver's id rules (notificationID), "" when the
// id is not a notification's.
func (s *Server) renderWebhook(h *hook, wakeOnResolved bool, data []byte) (inbox.Message, string, *webhookError) {
	m := inbox.Message{Kind: inbox.Wake, Source: SourceWebhook, From: "webhook:" + h.name,
		Attributes: map[string]string{"webhook": h.name, "format": h.Format}}
	var n inbox.AlertmanagerNotification
	if h.Format != WebhookJSON {
		parse := inbox.ParseAlertmanager
		if h.Format == WebhookGrafana {
			parse = inbox.ParseGrafana
		}
		fits := func(b inbox.Body) bool { return h.text != nil || s.fitsAs(m, b) }
		var err error
		n, err = parse(data, fits)
		if rej, ok := errors.AsType[*inbox.RejectError](err); ok && rej.Reason == inbox.RejectTooLarge {
			return m, "", refuse(http.StatusRequestEntityTooLarge, "the notification cannot be cut to fit one message of %d bytes (nats.max_message_bytes): %s", s.o.MaxMessageBytes, rej.Detail)
		}
		if err != nil {
			return m, "", refuse(http.StatusBadRequest, "webhook %q (format %s): %v", h.name, h.Format, err)
		}
		m.Text, m.ID = n.Body.Text, webhookID(h.name, n.Body.ID)
		maps.Copy(m.Attributes, n.Body.Attributes)
		if n.Body.AllResolved && !s.o.ResolvedWakes && !wakeOnResolved {
			m.Kind = inbox.Deferred
		}
	}
	if h.Deferred {
		m.Kind = inbox.Deferred
	}
	if h.text == nil && h.id == nil {
		return m, "webhook:" + h.name + ":" + n.GroupKey, nil
	}
	body, err := webhook.Decode(data)
	if err != nil {
		return m, "", refuse(http.StatusBadRequest, "webhook %q: %v", h.name, err)
	}
	groupKey := ""
	if h.Format != WebhookJSON && h.id == nil {
		groupKey = "webhook:" + h.name + ":" + n.GroupKey
	}
	if h.id != nil {
		id, werr := renderID(h, body)
		if werr != nil {
			return m, "", werr
		}
		m.ID = id
	} else if h.Format == WebhookJSON {
		m.ID = webhookID(h.name, hashOf(data))
	}
	if h.text == nil {
		return m, groupKey, nil
	}
	text, err := h.text.Render(body)
	if err != nil {
		return m, "", refuse(http.StatusUnprocessableEntity, "the text template of webhook %q failed on this body: %v", h.name, err)
	}
	if m.Text = strings.TrimSpace(text); m.Text == "" {
		return m, "", refuse(http.StatusUnprocessableEntity, "the text template of webhook %q rendered nothing for this body", h.name)
	}
	cut, ok := s.cutToFit(&m)
	if !ok {
		return m, "", refuse(http.StatusRequestEntityTooLarge, "the message does not fit %d bytes (nats.max_message_bytes) even with its text cut", s.o.MaxMessageBytes)
	}
	if cut > 0 {
		m.Attributes[attrTruncatedBytes] = strconv.Itoa(cut)
	}
	return m, groupKey, nil
}

// renderID runs h's id template: the id is its output on one line,
// trimmed, hashed when longer than maxWebhookID, and prefixed with the
// webhook's name, so two webhooks of one agent never share an id, nor a
// webhook and the messages route.
func renderID(h *hook, body any) (string, *webhookError) {
	id, err := h.id.Render(body)
	if err != nil {
		return "", refuse(http.StatusUnprocessableEntity, "the id template of webhook %q failed on this body: %v", h.name, err)
	}
	id = strings.Join(strings.Fields(id), " ")
	if id == "" {
		return "", refuse(http.StatusUnprocessableEntity, "the id template of webhook %q rendered nothing for this body", h.name)
	}
	if len(id) > maxWebhookID {
		id = "sha256-" + hashOf([]byte(id))
	}
	return webhookID(h.name, id), nil
}

// hashOf is the first 16 hex digits of data's SHA-256.
func hashOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:16]
}

// fitsAs reports whether m with b's text and attributes fits
// MaxMessageBytes.
func (s *Server) fitsAs(m inbox.Message, b inbox.Body) bool {
	m.Text, m.Attributes = b.Text, maps.Clone(m.Attributes)
	maps.Copy(m.Attributes, b.Attributes)
	_, ok := s.fits(m)
	return ok
}

// cutToFit cuts m's text, at a rune boundary, to the longest prefix that
// fits MaxMessageBytes with a last line saying how much was cut, and
// returns the bytes cut (0: it fit whole). false: not even an empty
// prefix fits.
func (s *Server) cutToFit(m *inbox.Message) (int, bool) {
	if _, ok := s.fits(*m); ok {
		return 0, true
	}
	full := m.Text
	with := func(n int) inbox.Message {
		c := *m
		c.Attributes = maps.Clone(m.Attributes)
		c.Attributes[attrTruncatedBytes] = strconv.Itoa(len(full) - n)
		c.Text = full[:n] + fmt.Sprintf("\n(cut to fit one message: %d of %d bytes shown)", n, len(full))
		return c
	}
	prefix := func(n int) int { return len(textclip.Bytes(full, n, "")) } // n moved back to a rune boundary
	if _, ok := s.fits(with(0)); !ok {
		return 0, false
	}
	lo, hi := 0, len(full) // with(lo) fits; with(hi) does not
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if _, ok := s.fits(with(prefix(mid))); ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	n := prefix(lo)
	*m = with(n)
	return len(full) - n, true
}

// observeWebhook reports the outcome of a request to a configured
// webhook (by the name in its path, so that a refusal before the handler
// ran, a 401, counts too).
func (s *Server) observeWebhook(obs Observer, r *http.Request, rec *requestRecord, status int) {
	name, _ := strings.CutPrefix(r.URL.Path, "/v1/webhooks/")
	table := rec.webhooks
	if table == nil { // refused before the handler ran (401, 503)
		table = s.webhooks()
	}
	if _, ok := table.hooks[name]; !ok {
		return // not a configured webhook: its name is the client's, not ours
	}
	for _, o := range outcomes(status, rec.truncated) {
		obs.WebhookNotification(name, o)
	}
}

// outcomes are what an answer with status is, for the Observer, of the
// Alertmanager receiver and the webhooks: accepted (and truncated when
// something was left out to fit), duplicate, template_error (422: only a
// webhook answers it), rejected (any other 4xx). 5xx answers are none:
// the sender retries them.
func outcomes(status, truncated int) []string {
	switch {
	case status == http.StatusAccepted && truncated > 0:
		return []string{OutcomeAccepted, OutcomeTruncated}
	case status == http.StatusAccepted:
		return []string{OutcomeAccepted}
	case status == http.StatusOK:
		return []string{OutcomeDuplicate}
	case status == http.StatusUnprocessableEntity:
		return []string{OutcomeTemplateError}
	case status >= 400 && status < 500:
		return []string{OutcomeRejected}
	}
	return nil
}
