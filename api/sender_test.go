package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/inbox"
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

// TestTheListingAndTheLookupShowTheSender: a message queued with the
// token ops shows sender "api, token ops" next to its self-declared from
// in the inbox listing (GET .../inbox) and the lookup (GET
// .../messages/{id}); a message that came with no authenticated sender
// shows none. On the old code neither answer had a sender.
func TestTheListingAndTheLookupShowTheSender(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	w.wantStatus(w.post("/v1/agents/alpha/pause", ""), http.StatusOK)
	w.wantStatus(w.post("/v1/agents/alpha/messages", `{"text": "ship it", "from": "ceo", "id": "s-1"}`), http.StatusAccepted)
	w.agent("alpha").Send(inbox.Message{ID: "n-1", Kind: inbox.Wake, Text: "from nats", Source: "nats:alerts.db", From: "ceo"})

	var in control.Inbox
	if err := json.Unmarshal(w.get("/v1/agents/alpha/inbox").body, &in); err != nil {
		t.Fatal(err)
	}
	if len(in.Messages) != 2 || in.Messages[0].Sender != "api, token ops" || in.Messages[0].From != "ceo" || in.Messages[1].Sender != "" {
		t.Fatalf("listing %+v", in.Messages)
	}
	for id, want := range map[string]string{"s-1": "api, token ops", "n-1": ""} {
		r := w.get("/v1/agents/alpha/messages/" + id)
		w.wantStatus(r, http.StatusOK)
		var info api.MessageInfo
		if err := json.Unmarshal(r.body, &info); err != nil {
			t.Fatal(err)
		}
		if info.Status != api.MessageQueued || info.Sender != want {
			t.Fatalf("lookup of %s: %s, want queued with sender %q", id, r.body, want)
		}
	}
}
