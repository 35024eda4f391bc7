package api_test

import (
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/inbox"
)

// testHooks are the webhooks of the tests: ci (json, for alpha, id from
// the body), notes (json, deferred, for alpha, no id template), grafana
// and am (for alpha, built-in renderings), and betas (json, for beta).
func testHooks() map[string]api.Webhook {
	return map[string]api.Webhook{
		"ci":      {Agent: "alpha", Text: "{{.repository}}: build {{.build}} {{.status}}", ID: "{{.repository}}-{{.build}}"},
		"notes":   {Agent: "alpha", Format: api.WebhookJSON, Text: "note: {{.note}}", Deferred: true},
		"grafana": {Agent: "alpha", Format: api.WebhookGrafana},
		"am":      {Agent: "alpha", Format: api.WebhookAlertmanager},
		"betas":   {Agent: "beta", Text: "{{.text}}"},
	}
}

// webhookWorld is a world with testHooks, the scoped ingest token "am"
// (alpha only), deliveries kept and outcomes observed.
func webhookWorld(t *testing.T, o api.Options) (*world, *deliveries, *observer) {
	t.Helper()
	d, obs := &deliveries{}, &observer{}
	if o.Webhooks == nil {
		o.Webhooks = testHooks()
	}
	o.Deliver, o.Observer = d.deliver, obs
	o.Tokens = withTokens(api.Token{Name: "am", Role: api.RoleIngest, Value: alphaIngestToken, Agents: []string{"alpha"}})
	return newWorld(t, o), d, obs
}

// hook posts body to webhook name with token and the JSON content type.
func (w *world) hook(name, token, body string) reply {
	w.t.Helper()
	return w.call(http.MethodPost, "/v1/webhooks/"+name, token, "application/json", body)
}

// webhookOutcomes returns the webhook outcomes observed since the last
// take, without the request lines.
func webhookOutcomes(obs *observer) []string {
	_, outcomes := obs.take()
	var out []string
	for _, o := range outcomes {
		if rest, ok := strings.CutPrefix(o, "webhook "); ok {
			out = append(out, rest)
		}
	}
	return out
}

const ciBuild = `{"repository": "payments", "build": 12345678901, "status": "failed", "url": "https://ci.example/b/1"}`

// A JSON body becomes one message: the template's text, the id
// template's id (prefixed with the webhook's name), kind inbox, source
// webhook; the ingest token may post it and the answer is 202.
func TestWebhookQueuesTheRenderedText(t *testing.T) {
	t.Parallel()
	w, d, obs := webhookWorld(t, api.Options{})
	r := w.hook("ci", alphaIngestToken, ciBuild)
	w.wantStatus(r, http.StatusAccepted)
	a := r.json(t)
	if a["status"] != "queued" || a["kind"] != "inbox" || a["id"] != "webhook:ci:payments-12345678901" || a["webhook"] != "ci" {
		t.Fatalf("answer %v", a)
	}
	msgs := d.all()
	if len(msgs) != 1 {
		t.Fatalf("%d messages delivered", len(msgs))
	}
	m := msgs[0]
	if m.Text != "payments: build 12345678901 failed" || m.Kind != inbox.Wake || m.Source != api.SourceWebhook ||
		m.ID != "webhook:ci:payments-12345678901" || m.Attributes["webhook"] != "ci" || m.Attributes["format"] != "json" {
		t.Fatalf("message %+v", m)
	}
	if got := webhookOutcomes(obs); !slices.Equal(got, []string{"ci accepted"}) {
		t.Fatalf("outcomes %q", got)
	}
	if !strings.Contains(w.logs.String(), "action=webhook") {
		t.Fatalf("the write is not logged:\n%s", w.logs.String())
	}
}

// Roles and scopes: read may not post (403), no token is 401, an ingest
// token scoped to alpha may post to alpha's webhook and not to beta's
// (404, as if it did not exist), operate may post anywhere. An unknown
// webhook is a JSON 404. Every refusal of a configured webhook is
// counted rejected.
func TestWebhookRolesAndScopes(t *testing.T) {
	t.Parallel()
	w, d, obs := webhookWorld(t, api.Options{})
	const body = `{"text": "hello"}`
	w.wantStatus(w.hook("betas", readToken, body), http.StatusForbidden)
	w.wantStatus(w.hook("betas", "", body), http.StatusUnauthorized)
	r := w.hook("betas", alphaIngestToken, body)
	w.wantStatus(r, http.StatusNotFound)
	if msg := r.errorText(t); msg != `unknown webhook "betas"` {
		t.Fatalf("404 says %q", msg)
	}
	if !strings.Contains(w.logs.String(), `result="unknown webhook \"betas\" (it is agent \"beta\"'s, outside token \"am\"'s agents)"`) {
		t.Fatalf("the write log does not say why:\n%s", w.logs)
	}
	w.wantStatus(w.hook("betas", operateToken, body), http.StatusAccepted)
	r = w.hook("nope", operateToken, body)
	w.wantStatus(r, http.StatusNotFound)
	if msg := r.errorText(t); !strings.Contains(msg, `unknown webhook "nope"`) {
		t.Fatalf("404 says %q", msg)
	}
	if got, want := webhookOutcomes(obs), []string{"betas rejected", "betas rejected", "betas rejected", "betas accepted"}; !slices.Equal(got, want) {
		t.Fatalf("outcomes %q, want %q", got, want)
	}
	if n := len(d.all()); n != 1 {
		t.Fatalf("%d messages delivered, want 1", n)
	}
}

// A body that is not JSON is 400; a template that fails on a body — a
// missing key, a wrong type — is 422 with the reason, counted
// template_error, and queues nothing.
func TestWebhookBadBodies(t *testing.T) {
	t.Parallel()
	w, d, obs := webhookWorld(t, api.Options{})
	w.wantStatus(w.hook("ci", operateToken, `{"repository": "payments"`), http.StatusBadRequest)
	w.wantStatus(w.hook("ci", operateToken, `{"a": 1} {"b": 2}`), http.StatusBadRequest)
	r := w.hook("ci", operateToken, `{"repository": "payments", "status": "ok"}`)
	w.wantStatus(r, http.StatusUnprocessableEntity)
	if msg := r.errorText(t); !strings.Contains(msg, `webhook "ci"`) || !strings.Contains(msg, `map has no entry for key "build"`) {
		t.Fatalf("422 says %q", msg)
	}
	w.wantStatus(w.hook("betas", operateToken, `{"other": 1}`), http.StatusUnprocessableEntity)
	w.wantStatus(w.hook("grafana", operateToken, `{"text": "not grafana"}`), http.StatusBadRequest)
	want := []string{"ci rejected", "ci rejected", "ci template_error", "betas template_error", "grafana rejected"}
	if got := webhookOutcomes(obs); !slices.Equal(got, want) {
		t.Fatalf("outcomes %q, want %q", got, want)
	}
	if n := len(d.all()); n != 0 {
		t.Fatalf("%d messages delivered for bad bodies", n)
	}
}

// Dedup is per agent: the id template's id again is a duplicate (200,
// nothing queued); without an id template an identical body is, a
// different one is not.
func TestWebhookDuplicates(t *testing.T) {
	t.Parallel()
	w, d, obs := webhookWorld(t, api.Options{})
	w.wantStatus(w.hook("ci", operateToken, ciBuild), http.StatusAccepted)
	r := w.hook("ci", operateToken, strings.Replace(ciBuild, "failed", "still failed", 1))
	w.wantStatus(r, http.StatusOK)
	if a := r.json(t); a["status"] != "duplicate" || a["id"] != "webhook:ci:payments-12345678901" || a["reason"] != api.DuplicateWindow {
		t.Fatalf("answer %v", a)
	}
	w.wantStatus(w.hook("notes", operateToken, `{"note": "a"}`), http.StatusAccepted)
	w.wantStatus(w.hook("notes", operateToken, `{"note": "a"}`), http.StatusOK)
	w.wantStatus(w.hook("notes", operateToken, `{"note": "b"}`), http.StatusAccepted)
	if got, want := webhookOutcomes(obs), []string{"ci accepted", "ci duplicate", "notes accepted", "notes duplicate", "notes accepted"}; !slices.Equal(got, want) {
		t.Fatalf("outcomes %q, want %q", got, want)
	}
	if n := len(d.all()); n != 3 {
		t.Fatalf("%d messages delivered, want 3", n)
	}
}

// mode inbox wakes the agent (a turn runs); mode deferred queues without
// a wake.
func TestWebhookDeferredDoesNotWake(t *testing.T) {
	t.Parallel()
	hooks := testHooks()
	hooks["later"] = api.Webhook{Agent: "beta", Text: "later: {{.note}}", Deferred: true}
	w := newWorld(t, api.Options{Webhooks: hooks})
	r := w.hook("later", operateToken, `{"note": "x"}`)
	w.wantStatus(r, http.StatusAccepted)
	if a := r.json(t); a["kind"] != "deferred" {
		t.Fatalf("answer %v", a)
	}
	w.wantStatus(w.hook("notes", operateToken, `{"note": "y"}`), http.StatusAccepted) // alpha, deferred too
	w.wantStatus(w.hook("ci", operateToken, ciBuild), http.StatusAccepted)            // alpha, inbox: wakes
	w.waitEvent("alpha", events.TurnCompleted)
	if st := w.agent("beta").Status(); st.Deferred != 1 || st.PendingWakes != 0 || st.Turns != 0 {
		t.Fatalf("beta woke for a deferred webhook: %+v", st)
	}
}

// A body over api.alertmanager_max_bytes is 413; a rendered text over
// nats.max_message_bytes is cut to fit, says so, and is counted
// truncated.
func TestWebhookSizes(t *testing.T) {
	t.Parallel()
	w, d, obs := webhookWorld(t, api.Options{AlertmanagerMaxBytes: 64 << 10, MaxMessageBytes: 2048})
	w.wantStatus(w.hook("betas", operateToken, `{"text": "`+strings.Repeat("x", 70<<10)+`"}`), http.StatusRequestEntityTooLarge)
	r := w.hook("betas", operateToken, `{"text": "`+strings.Repeat("é", 3000)+`"}`)
	w.wantStatus(r, http.StatusAccepted)
	a := r.json(t)
	cut, _ := a["truncated_bytes"].(float64)
	if cut <= 0 {
		t.Fatalf("answer %v, want truncated_bytes", a)
	}
	msgs := d.all()
	if len(msgs) != 1 {
		t.Fatalf("%d messages", len(msgs))
	}
	m := msgs[0]
	if data, _ := api.EncodeMessage(m); len(data) > 2048 {
		t.Fatalf("queued message is %d bytes", len(data))
	}
	if !strings.Contains(m.Text, "(cut to fit one message: ") || !strings.Contains(m.Text, "of 6000 bytes shown)") || m.Attributes["truncated_bytes"] == "" {
		t.Fatalf("message does not say it was cut: %q %v", m.Text[len(m.Text)-80:], m.Attributes)
	}
	if got, want := webhookOutcomes(obs), []string{"betas rejected", "betas accepted", "betas truncated"}; !slices.Equal(got, want) {
		t.Fatalf("outcomes %q, want %q", got, want)
	}
}

// The grafana format renders Grafana's payload compactly, its id is the
// Alertmanager receiver's (a retry is a duplicate), and an all-resolved
// notification is deferred as at the receiver. The alertmanager format
// is the receiver's rendering.
func TestWebhookAlertFormats(t *testing.T) {
	t.Parallel()
	w, d, _ := webhookWorld(t, api.Options{})
	payload, err := os.ReadFile("../inbox/testdata/grafana_firing.json")
	if err != nil {
		t.Fatal(err)
	}
	w.wantStatus(w.hook("grafana", alphaIngestToken, string(payload)), http.StatusAccepted)
	w.wantStatus(w.hook("grafana", alphaIngestToken, string(payload)), http.StatusOK)
	resolved := strings.ReplaceAll(string(payload), `"firing"`, `"resolved"`)
	r := w.hook("grafana", alphaIngestToken, resolved)
	w.wantStatus(r, http.StatusAccepted)
	if a := r.json(t); a["kind"] != "deferred" {
		t.Fatalf("all-resolved answer %v, want deferred", a)
	}
	w.wantStatus(w.hook("am", alphaIngestToken, notification(t, alert("a1", 0, false))), http.StatusAccepted)
	msgs := d.all()
	if len(msgs) != 3 {
		t.Fatalf("%d messages", len(msgs))
	}
	if g := msgs[0]; !strings.HasPrefix(g.Text, "Grafana alert notification [FIRING:2]") || !strings.Contains(g.Text, "values={B=94.23943737541908, C=1}") ||
		!strings.HasPrefix(g.ID, "webhook:grafana:alertmanager:") || g.Attributes["receiver"] != "oncall-webhook" {
		t.Fatalf("grafana message %+v", g)
	}
	if am := msgs[2]; !strings.HasPrefix(am.Text, "Alertmanager notification [FIRING:1]") || am.Attributes["format"] != "alertmanager" {
		t.Fatalf("alertmanager message %+v", am)
	}
}
