package natsinbox_test

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/store/memstore"
)

// The worker publishes into an agent's input with a Nats-Msg-Id scoped
// to the agent, "<agent>/<id>" (natsbus.MsgID), so JetStream's stream-wide deduplication
// keys messages per agent; the agent, its events and its records know the
// message by the id the sender gave (the envelope's). A message already
// in the stream from a version that published the plain id is known by
// it as before, and a Nats-Msg-Id that does not scope the envelope's id
// to this agent is the message's id, as a raw publisher set it.
func TestScopedMessageIDIsKnownByTheSendersID(t *testing.T) {
	t.Parallel()
	r := newRig(t, memstore.New(nil))
	for _, c := range []struct{ name, header, body, want string }{
		{"scoped by the worker", "a/inc-42", `{"text": "t", "id": "inc-42"}`, "inc-42"},
		{"plain id of an older version", "inc-43", `{"text": "t", "id": "inc-43"}`, "inc-43"},
		{"scoped to another agent", "b/inc-44", `{"text": "t", "id": "inc-44"}`, "b/inc-44"},
		{"a raw publisher's own key", "feed/1", `{"text": "t", "id": "inc-45"}`, "feed/1"},
		{"header without an envelope id", "a/inc-46", `plain text`, "a/inc-46"},
		{"an id with a line break, which a header carries as a space", "a/line\nbreak", `{"text": "t", "id": "line\nbreak"}`, "line\nbreak"},
	} {
		msg := nats.NewMsg("agents.a.inbox")
		msg.Data = []byte(c.body)
		msg.Header.Set(nats.MsgIdHdr, c.header)
		if _, err := r.conn.JS.PublishMsg(t.Context(), msg); err != nil {
			t.Fatal(err)
		}
		if m := r.next(t); m.ID != c.want {
			t.Errorf("%s: Nats-Msg-Id %q, body %s: id %q, want %q", c.name, c.header, c.body, m.ID, c.want)
		}
	}
}
