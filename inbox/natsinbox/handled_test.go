package natsinbox_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/inbox/natsinbox"
	"github.com/agent-worker/agent-worker/store/natskv"
	"github.com/agent-worker/agent-worker/turnlog"
)

// settler is an agent whose every message is handled at once.
type settler struct{ n atomic.Int64 }

func (s *settler) Send(m inbox.Message) {
	s.n.Add(1)
	m.Receipt.Handled()
}

// The handled-id state of an agent is one record of bounded size, however
// many messages it handled: before, every handled id was a key of its own
// for a day (5,000 keys here, and heap in the embedded server for each).
// The newest ids still make a republish a duplicate.
func TestHandledIDStateIsBoundedAfter5000Messages(t *testing.T) {
	t.Parallel()
	const messages, keep = 5000, 1000
	conn, subjects := startServer(t)
	st, err := natskv.Open(t.Context(), conn.JS, natskv.Options{Bucket: "hb"})
	if err != nil {
		t.Fatal(err)
	}
	tgt := &settler{}
	b, err := natsinbox.Start(t.Context(), conn.NC, conn.JS, []natsinbox.Agent{{Name: "a", Target: tgt, Cap: 50}},
		natsinbox.Options{Subjects: subjects, Stream: "AGENTS", MaxBytes: 4096, Store: st, HandledKeep: keep})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	for i := range messages {
		id := fmt.Sprintf("m-%d", i)
		if _, err := conn.JS.PublishAsync("agents.a.inbox", []byte(`{"text":"alert `+id+`"}`), jetstream.WithMsgID(id)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-conn.JS.PublishAsyncComplete():
	case <-time.After(deadline):
		t.Fatal("publishes not acknowledged")
	}
	settled := func() bool {
		info, err := conn.JS.Stream(t.Context(), "AGENTS")
		if err != nil {
			t.Fatal(err)
		}
		c, err := info.Consumer(t.Context(), "agent-a")
		if err != nil {
			t.Fatal(err)
		}
		ci, err := c.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return ci.NumPending == 0 && ci.NumAckPending == 0
	}
	end := time.Now().Add(2 * deadline)
	for tgt.n.Load() < messages || !settled() {
		if time.Now().After(end) {
			t.Fatalf("%d of %d messages handled and acked", tgt.n.Load(), messages)
		}
		<-time.After(20 * time.Millisecond)
	}

	kv, err := conn.JS.KeyValue(t.Context(), "hb-state")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var handledKeys []string
	for k := range keys.Keys() {
		if strings.HasPrefix(k, "handled.") {
			handledKeys = append(handledKeys, k)
		}
	}
	if len(handledKeys) != 1 {
		t.Fatalf("%d handled-id keys after %d messages, want the agent's one record", len(handledKeys), messages)
	}
	e, err := st.Get(t.Context(), handledKeys[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Value) > 9+keep*32 {
		t.Fatalf("record is %d bytes, want at most %d ids", len(e.Value), keep)
	}
	if _, ok, _ := turnlog.LookupHandled(t.Context(), st, "a", fmt.Sprintf("m-%d", messages-1), time.Now()); !ok {
		t.Fatal("the newest handled id is not in the record")
	}
	if _, ok, _ := turnlog.LookupHandled(t.Context(), st, "a", "m-0", time.Now()); ok {
		t.Fatal("the record holds more than its newest ids")
	}

	// A republish of a recent id (past the stream's duplicate window: no
	// Nats-Msg-Id, the id in the body) is acked without reaching the agent.
	if _, err := conn.JS.Publish(t.Context(), "agents.a.inbox", []byte(fmt.Sprintf(`{"id":"m-%d","text":"again"}`, messages-2))); err != nil {
		t.Fatal(err)
	}
	for !settled() {
		if time.Now().After(end) {
			t.Fatal("the republished message was not acked")
		}
		<-time.After(20 * time.Millisecond)
	}
	if n := tgt.n.Load(); n != messages {
		t.Fatalf("%d messages reached the agent, want %d: the republish of a handled id ran again", n, messages)
	}
}
