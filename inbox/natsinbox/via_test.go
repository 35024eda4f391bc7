package natsinbox_test

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/inbox/natsinbox"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// The Agent-Worker-Via header the API's publish carries, sealed, becomes
// Message.Via; any other value is ignored.
func TestViaHeaderNamesTheReceiver(t *testing.T) {
	t.Parallel()
	r := newRig(t, memstore.New(nil))
	for _, c := range []struct{ header, want string }{
		{inbox.ViaAlertmanager, inbox.ViaAlertmanager},
		{"grafana", ""},
		{"", ""},
	} {
		msg := nats.NewMsg("agents.a.inbox")
		msg.Data = []byte(`{"text": "Alertmanager notification [FIRING:1]"}`)
		if c.header != "" {
			msg.Header.Set(natsinbox.HeaderVia, c.header)
			natsinbox.SealVia(r.key, msg)
		}
		if _, err := r.conn.JS.PublishMsg(t.Context(), msg); err != nil {
			t.Fatal(err)
		}
		if m := r.next(t); m.Via != c.want {
			t.Errorf("header %q: Via %q, want %q", c.header, m.Via, c.want)
		}
	}
}
