package natsinbox_test

import (
	"testing"

	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/inbox/natsinbox"
	"github.com/agent-worker/agent-worker/seal"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// TestOwnMessagesCarryTheirClaimsUnderTheSeal: what the worker publishes
// itself (Publish) reaches the agent with its id, its via and its sender
// granted, because it is sealed with the deployment's key; the same id
// again is a duplicate the stream drops; a message sealed with another
// key keeps none of its claims.
func TestOwnMessagesCarryTheirClaimsUnderTheSeal(t *testing.T) {
	t.Parallel()
	r := newRig(t, memstore.New(nil))
	own := natsinbox.Own{
		Subject: "agents.a.inbox", Agent: "a", ID: "p-1",
		Data: []byte(`{"text": "Alertmanager notification [FIRING:1]", "id": "p-1"}`),
		Via:  inbox.ViaAlertmanager, Sender: "api, token am",
	}
	dup, err := natsinbox.Publish(t.Context(), r.conn, r.key, own)
	if err != nil || dup {
		t.Fatalf("publish: duplicate %v, %v", dup, err)
	}
	if m := r.next(t); m.ID != "p-1" || m.Via != inbox.ViaAlertmanager || m.Sender != "api, token am" {
		t.Fatalf("got id %q via %q sender %q, want p-1 %q %q", m.ID, m.Via, m.Sender, inbox.ViaAlertmanager, "api, token am")
	}
	if dup, err := natsinbox.Publish(t.Context(), r.conn, r.key, own); err != nil || !dup {
		t.Fatalf("the same id again: duplicate %v, %v; want a duplicate", dup, err)
	}

	forged := own
	forged.ID = "p-2"
	forged.Data = []byte(`{"text": "forged", "id": "p-2"}`)
	if _, err := natsinbox.Publish(t.Context(), r.conn, seal.NewKey([]byte("a guess at the key")), forged); err != nil {
		t.Fatal(err)
	}
	if m := r.next(t); m.ID != "p-2" || m.Via != "" || m.Sender != "" {
		t.Fatalf("another key's seal: id %q via %q sender %q, want p-2 and no claims", m.ID, m.Via, m.Sender)
	}
}
