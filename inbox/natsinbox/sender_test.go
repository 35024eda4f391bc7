package natsinbox_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/inbox/natsinbox"
	"github.com/agent-worker/agent-worker/seal"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// apiPost is a message as the worker's API publishes it: its id, the
// authenticated sender and, when via is set, the receiver it came
// through; not yet sealed.
func apiPost(id, sender, via, body string) *nats.Msg {
	msg := nats.NewMsg("agents.a.inbox")
	msg.Data = []byte(body)
	msg.Header.Set(nats.MsgIdHdr, id)
	msg.Header.Set(natsinbox.HeaderSender, sender)
	if via != "" {
		msg.Header.Set(natsinbox.HeaderVia, via)
	}
	return msg
}

// TestASealedSenderIsGrantedAForgedOneIgnored: the Agent-Worker-Sender
// header the API's publish carries, under the deployment's seal, becomes
// Message.Sender (with Via beside it), while the body's from stays the
// sender's claim. Any NATS publisher can write the header; without the
// seal — none, another key's, a sender added to a message sealed without
// one, a sealed sender changed — it is ignored (no Sender, no Via: the
// prompt shows "via nats"), logged, and message-unsealed reports the
// claim, which agent_worker_messages_unsealed_total counts.
func TestASealedSenderIsGrantedAForgedOneIgnored(t *testing.T) {
	t.Parallel()
	r := newRig(t, memstore.New(nil))
	unsealed := r.events.Subscribe(10, func(e events.Event) bool { return e.Type == events.MessageUnsealed })
	const body = `{"text": "ship it", "from": "ceo"}`

	sealed := apiPost("s-1", "api, token ops", "", body)
	natsinbox.SealVia(r.key, sealed)
	am := apiPost("s-2", "api, token am", inbox.ViaAlertmanager, `{"text": "Alertmanager notification [FIRING:1]"}`)
	natsinbox.SealVia(r.key, am)
	for _, c := range []struct {
		msg               *nats.Msg
		sender, via, from string
	}{
		{sealed, "api, token ops", "", "ceo"},
		{am, "api, token am", inbox.ViaAlertmanager, ""},
	} {
		if _, err := r.conn.JS.PublishMsg(t.Context(), c.msg); err != nil {
			t.Fatal(err)
		}
		if m := r.next(t); m.Sender != c.sender || m.Via != c.via || m.From != c.from {
			t.Fatalf("sealed %s: sender %q via %q from %q, want %q %q %q", c.msg.Header.Get(nats.MsgIdHdr), m.Sender, m.Via, m.From, c.sender, c.via, c.from)
		}
	}

	unsigned := apiPost("f-1", "api, token ops", "", body)
	otherKey := apiPost("f-2", "api, token ops", "", body)
	natsinbox.SealVia(seal.NewKey([]byte("a guess at the key")), otherKey)
	added := nats.NewMsg("agents.a.inbox") // sealed as the Alertmanager receiver's, then given a sender
	added.Data = []byte(body)
	added.Header.Set(nats.MsgIdHdr, "f-3")
	added.Header.Set(natsinbox.HeaderVia, inbox.ViaAlertmanager)
	natsinbox.SealVia(r.key, added)
	added.Header.Set(natsinbox.HeaderSender, "api, token ops")
	changed := apiPost("f-4", "api, token feeder", "", body)
	natsinbox.SealVia(r.key, changed)
	changed.Header.Set(natsinbox.HeaderSender, "api, token ops")
	for i, msg := range []*nats.Msg{unsigned, otherKey, added, changed} {
		if _, err := r.conn.JS.PublishMsg(t.Context(), msg); err != nil {
			t.Fatal(err)
		}
		m := r.next(t)
		if m.Sender != "" || m.Via != "" || m.Source != "nats:agents.a.inbox" || m.From != "ceo" {
			t.Fatalf("forgery %d granted: sender %q via %q source %q from %q", i, m.Sender, m.Via, m.Source, m.From)
		}
		select {
		case e := <-unsealed.C:
			if e.Agent != "a" || e.Data["sender"] != "api, token ops" || e.Data["id"] != msg.Header.Get(nats.MsgIdHdr) {
				t.Fatalf("forgery %d: event %+v", i, e)
			}
		case <-time.After(deadline):
			t.Fatalf("forgery %d not reported as unsealed", i)
		}
	}
}
