package api_test

import (
	"net/http"
	"testing"

	"github.com/agent-worker/agent-worker/api"
)

// TestAPostCarriesItsTokensName: every way the API queues a message —
// POST messages, the Alertmanager receiver, a webhook — hands it on with
// the name of the token that posted it as its authenticated sender, not
// the body's from (which stays as the sender wrote it); on an API without
// tokens the sender says nobody was authenticated. On the old code the
// token's name reached only the request log.
func TestAPostCarriesItsTokensName(t *testing.T) {
	t.Parallel()
	w, d, _ := webhookWorld(t, api.Options{})
	w.wantStatus(w.call(http.MethodPost, "/v1/agents/alpha/messages", operateToken, "application/json", `{"text": "ship it", "from": "ceo"}`), http.StatusAccepted)
	w.wantStatus(w.call(http.MethodPost, "/v1/alertmanager/alpha", alphaIngestToken, "application/json", alertmanagerFiring(t)), http.StatusAccepted)
	w.wantStatus(w.hook("ci", alphaIngestToken, ciBuild), http.StatusAccepted)
	want := []struct{ source, from, sender string }{
		{api.SourceAPI, "ceo", "api, token ops"},
		{api.SourceAlertmanager, "alertmanager", "api, token am"},
		{api.SourceWebhook, "webhook:ci", "api, token am"},
	}
	msgs := d.all()
	if len(msgs) != len(want) {
		t.Fatalf("%d messages delivered, want %d", len(msgs), len(want))
	}
	for i, m := range msgs {
		if m.Source != want[i].source || m.From != want[i].from || m.Sender != want[i].sender {
			t.Errorf("message %d: source %q from %q sender %q, want %+v", i, m.Source, m.From, m.Sender, want[i])
		}
	}

	open := newWorld(t, api.Options{Tokens: []api.Token{}, Deliver: d.deliver})
	open.wantStatus(open.call(http.MethodPost, "/v1/agents/alpha/messages", "", "application/json", `{"text": "hi", "from": "ops"}`), http.StatusAccepted)
	if m := d.all()[len(want)]; m.Sender != api.SenderUnauthenticated || m.From != "ops" {
		t.Fatalf("without tokens: sender %q from %q, want %q and the body's from", m.Sender, m.From, api.SenderUnauthenticated)
	}
}
