package natsinbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/inbox/natsinbox"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memory"
	"github.com/agent-worker/agent-worker/turnlog"
)

func (r *rig) next(t *testing.T) inbox.Message {
	t.Helper()
	select {
	case m := <-r.tgt.sent:
		return m
	case <-time.After(deadline):
		t.Fatal("message not delivered")
		return inbox.Message{}
	}
}

// The Agent-Worker-Via header the API's publish carries, sealed, becomes
// Message.Via; any other value is ignored.
func TestViaHeaderNamesTheReceiver(t *testing.T) {
	t.Parallel()
	r := newRig(t, memory.New(nil), 30*time.Second)
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

// failingStore fails every read.
type failingStore struct{ store.Store }

func (failingStore) Get(context.Context, string) (store.Entry, error) {
	return store.Entry{}, errors.New("store down")
}

// recordingStore tells when a handled id has been written.
type recordingStore struct {
	store.Store
	written chan string
}

func (s recordingStore) Create(ctx context.Context, key string, v []byte, ttl time.Duration) (uint64, error) {
	rev, err := s.Store.Create(ctx, key, v, ttl)
	if strings.HasPrefix(key, "handled.") {
		s.written <- string(v)
	}
	return rev, err
}

// HandledID answers the binding's own question: once a message's turn is
// recorded, its id is handled.
func TestHandledIDAfterTheTurn(t *testing.T) {
	t.Parallel()
	st := recordingStore{Store: memory.New(nil), written: make(chan string, 1)}
	r := newRig(t, st, 30*time.Second)
	ctx := t.Context()
	if ok, err := natsinbox.HandledID(ctx, st, "a", "job-1"); ok || err != nil {
		t.Fatalf("before: handled %v, %v", ok, err)
	}
	r.publish(t, "agents.a.inbox", "job-1", `{"text": "rotate the certificates", "id": "job-1"}`)
	// The driver names the turn that handled the message; the record
	// keeps it, so a lookup from any replica can say which turn.
	r.next(t).Receipt.(interface{ HandledBy(turn uint64) }).HandledBy(7)
	select {
	case <-st.written:
		h, ok, err := turnlog.LookupHandled(ctx, st, "a", "job-1", time.Now())
		if err != nil || !ok || h.ID != "job-1" || h.Turn != 7 || h.At.IsZero() {
			t.Fatalf("handled record %+v %v (%v)", h, ok, err)
		}
	case <-time.After(deadline):
		t.Fatal("the handled id was never recorded")
	}
	if ok, err := natsinbox.HandledID(ctx, st, "a", "job-1"); !ok || err != nil {
		t.Fatalf("after the turn: handled %v, %v", ok, err)
	}
	for _, c := range []struct{ agent, id string }{{"a", "job-2"}, {"b", "job-1"}} {
		if ok, err := natsinbox.HandledID(ctx, st, c.agent, c.id); ok || err != nil {
			t.Errorf("%s/%s: handled %v, %v", c.agent, c.id, ok, err)
		}
	}
	if _, err := natsinbox.HandledID(ctx, failingStore{st}, "a", "job-1"); err == nil {
		t.Error("a store error was not returned")
	}
}
