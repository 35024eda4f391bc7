package natsinbox_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/store/memstore"
	"github.com/agent-worker/agent-worker/turnlog"
)

// Every dead-lettered message of a configured agent leaves a record of
// why under its id — the Nats-Msg-Id, else the envelope's id, else its
// stream sequence — so a lookup by id can say what became of it.
func TestDeadLettersAreRecordedByID(t *testing.T) {
	t.Parallel()
	st := memstore.New(nil)
	r := newRig(t, st)
	ctx := t.Context()
	log := turnlog.New(st, nil)

	r.publish(t, "agents.a.inbox", "bad-1", `{"text": "unterminated`)
	big := fmt.Sprintf(`{"id": "big-1", "text": %q}`, strings.Repeat("x", 5000))
	if _, err := r.conn.JS.Publish(ctx, "agents.a.inbox", []byte(big)); err != nil {
		t.Fatal(err)
	}
	ack, err := r.conn.JS.Publish(ctx, "agents.a.inbox", []byte("   "))
	if err != nil {
		t.Fatal(err)
	}
	r.publish(t, "agents.a.inbox", "full-1", `{"text": "one too many"}`)
	m := r.next(t)
	if err := r.b.DeadLetter(ctx, "a", m, "dropped", "failed in too many turns"); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct{ id, reason, detail string }{
		{"bad-1", inbox.RejectInvalidJSON, ""},
		{"big-1", inbox.RejectTooLarge, "limit is 4096"},
		{fmt.Sprintf("AGENTS-seq-%d", ack.Sequence), inbox.RejectEmpty, "whitespace"},
		{"full-1", "dropped", "too many turns"},
	} {
		var d *turnlog.DeadLetter
		wait.For(t, "dead-letter record of "+c.id, func() bool {
			d, err = log.DeadLettered(ctx, "a", c.id)
			return err == nil && d != nil
		})
		if d.ID != c.id || d.Reason != c.reason || !strings.Contains(d.Detail, c.detail) || d.Subject != "agents.a.inbox" ||
			d.DLQ != "agents.a.dlq" || d.At.IsZero() {
			t.Errorf("%s: record %+v", c.id, d)
		}
	}
	// A message for an agent nobody configured is dead-lettered but not
	// recorded: no route could ask for it.
	dlq, err := r.conn.NC.SubscribeSync("agents._unknown.dlq")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.conn.NC.PublishMsg(&nats.Msg{Subject: "agents.ghost.inbox", Data: []byte("hi"), Header: nats.Header{nats.MsgIdHdr: {"ghost-1"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := dlq.NextMsg(deadline); err != nil {
		t.Fatalf("ghost's message not dead-lettered: %v", err)
	}
	r.b.Stop() // writes what records are queued
	if d, err := log.DeadLettered(ctx, "ghost", "ghost-1"); err != nil || d != nil {
		t.Errorf("unknown agent's message recorded: %+v, %v", d, err)
	}
}
