package natsinbox_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/inbox/natsinbox"
	"github.com/agent-worker/agent-worker/store/memory"
)

// A subagent's report (Agent-Worker-Via: subagent, the subagent's id as
// Nats-Msg-Id) becomes a message with Via "subagent" and source
// "subagent:<id>", from which the driver wakes the parent with source
// subagent.
func TestSubagentReportHeader(t *testing.T) {
	t.Parallel()
	r := newRig(t, memory.New(nil), 30*time.Second)
	msg := nats.NewMsg("agents.a.inbox")
	msg.Data = []byte(`{"text": "Subagent a-sub-3 completed.", "id": "a-sub-3", "from": "a-sub-3"}`)
	msg.Header.Set(nats.MsgIdHdr, "a-sub-3")
	msg.Header.Set(natsinbox.HeaderVia, natsinbox.ViaSubagent)
	if _, err := r.conn.JS.PublishMsg(t.Context(), msg); err != nil {
		t.Fatal(err)
	}
	m := r.next(t)
	if m.Via != natsinbox.ViaSubagent || m.Source != "subagent:a-sub-3" || m.ID != "a-sub-3" || m.From != "a-sub-3" {
		t.Fatalf("report delivered as %+v", m)
	}
}
