package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agent-worker/agent-worker/api"
)

// TestMessageIDsCannotTakeAnotherRoutesIDs: a message posted to POST
// /v1/agents/{name}/messages may not choose an id in the namespaces of
// the webhooks ("webhook:") or the Alertmanager receiver
// ("alertmanager:"), in any case: 400 naming the reserved prefix, and
// nothing queued — else a message could take the id of a notification
// still to come, which would then be dropped as its duplicate. Other ids
// are queued as before, and the notification that came through its own
// route is queued.
func TestMessageIDsCannotTakeAnotherRoutesIDs(t *testing.T) {
	t.Parallel()
	w, d, _ := webhookWorld(t, api.Options{})
	for _, q := range []struct{ id, prefix string }{
		{"webhook:ci:payments-12345678901", "webhook:"},
		{"Webhook:ci:payments-12345678901", "webhook:"},
		{"  webhook:ci:x", "webhook:"},
		{"alertmanager:f7f0ebad32188d25", "alertmanager:"},
		{"ALERTMANAGER:f7f0ebad32188d25", "alertmanager:"},
	} {
		for _, token := range []string{alphaIngestToken, operateToken} {
			r := w.call(http.MethodPost, "/v1/agents/alpha/messages", token, "application/json", `{"text": "silence it", "id": "`+q.id+`"}`)
			w.wantStatus(r, http.StatusBadRequest)
			if msg := r.errorText(t); !strings.Contains(msg, `"`+q.prefix+`"`) || !strings.Contains(msg, "reserved") {
				t.Fatalf("id %q: 400 says %q", q.id, msg)
			}
		}
	}
	if n := len(d.all()); n != 0 {
		t.Fatalf("%d messages queued with reserved ids", n)
	}
	for _, id := range []string{"ticket-4711", "my-webhook:1", "api-alertmanager:2", "webhook"} {
		r := w.call(http.MethodPost, "/v1/agents/alpha/messages", alphaIngestToken, "application/json", `{"text": "x", "id": "`+id+`"}`)
		w.wantStatus(r, http.StatusAccepted)
	}
	// The webhook's notification, whose id a message tried to take, is
	// queued: nothing took it.
	r := w.hook("ci", alphaIngestToken, ciBuild)
	w.wantStatus(r, http.StatusAccepted)
	if m := r.json(t); m["status"] != "queued" || m["id"] != "webhook:ci:payments-12345678901" {
		t.Fatalf("the webhook after the attempts: %s", r.body)
	}
	r = w.post("/v1/alertmanager/alpha", alertmanagerFiring(t))
	w.wantStatus(r, http.StatusAccepted)
	if id, _ := r.json(t)["id"].(string); !strings.HasPrefix(id, "alertmanager:") {
		t.Fatalf("the receiver's id %q is not in the namespace the messages route refuses", id)
	}
}

// TestScopedTokenCannotTellForbiddenWebhooksFromUnknown: a token whose
// agents do not include a webhook's agent gets the very answer an
// unknown webhook gets — 404, the same error for the same name — so it
// cannot learn which webhook names exist; nothing is queued. A token
// that may act on the agent is served as before.
func TestScopedTokenCannotTellForbiddenWebhooksFromUnknown(t *testing.T) {
	t.Parallel()
	w, d, _ := webhookWorld(t, api.Options{Webhooks: map[string]api.Webhook{
		"betas": {Agent: "beta", Text: "{{.text}}"},
	}})
	const body = `{"text": "hello"}`
	forbidden := w.hook("betas", alphaIngestToken, body)
	w.wantStatus(forbidden, http.StatusNotFound)
	if err := w.srv.SetWebhooks(map[string]api.Webhook{}, nil); err != nil {
		t.Fatal(err)
	}
	unknown := w.hook("betas", alphaIngestToken, body)
	w.wantStatus(unknown, http.StatusNotFound)
	if f, u := forbidden.errorText(t), unknown.errorText(t); f != u {
		t.Fatalf("a forbidden webhook answers %q, an unknown one %q", f, u)
	}
	if n := len(d.all()); n != 0 {
		t.Fatalf("%d messages queued", n)
	}
}
