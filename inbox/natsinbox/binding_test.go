package natsinbox_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/inbox/natsinbox"
	"github.com/agent-worker/agent-worker/natsbus"
	"github.com/agent-worker/agent-worker/seal"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memory"
)

const deadline = 20 * time.Second

// target is an agent that records what it is sent.
type target struct {
	mu   sync.Mutex
	got  []inbox.Message
	sent chan inbox.Message
}

func newTarget() *target { return &target{sent: make(chan inbox.Message, 100)} }

func (t *target) Send(m inbox.Message) {
	t.mu.Lock()
	t.got = append(t.got, m)
	t.mu.Unlock()
	t.sent <- m
}

func (t *target) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.got)
}

// slowHandled holds every write of a handled id for hold: a slow store,
// or one the worker reaches only after a NATS reconnect.
type slowHandled struct {
	store.Store
	hold time.Duration
}

// wait holds a write of key for s.hold if it is a handled-id record.
func (s slowHandled) wait(ctx context.Context, key string) error {
	if !strings.HasPrefix(key, "handled.") {
		return nil
	}
	t := time.NewTimer(s.hold)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s slowHandled) Create(ctx context.Context, key string, v []byte, ttl time.Duration) (uint64, error) {
	if err := s.wait(ctx, key); err != nil {
		return 0, err
	}
	return s.Store.Create(ctx, key, v, ttl)
}

type rig struct {
	conn *natsbus.Conn
	b    *natsinbox.Binding
	tgt  *target
	// key is the deployment's sealing key the binding checks.
	key seal.Key
	// events sees the binding's events.
	events *events.Bus
}

// startServer starts an embedded NATS server with the agents' input
// stream AGENTS over subjects' inboxes and deferred subjects.
func startServer(t *testing.T) (*natsbus.Conn, natsbus.Subjects) {
	t.Helper()
	conn, err := natsbus.Connect(config.NATS{Listen: "-1"}, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	subjects := natsbus.Subjects{Prefix: "agents"}
	if _, err := natsbus.EnsureStream(t.Context(), conn.JS, natsbus.StreamSpec{Name: "AGENTS", DuplicateWindow: time.Minute,
		Subjects: []string{subjects.AllInboxes(), subjects.AllDeferred()}}, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	return conn, subjects
}

func newRig(t *testing.T, st store.Store, ackWait time.Duration) *rig {
	t.Helper()
	conn, subjects := startServer(t)
	r := &rig{conn: conn, tgt: newTarget(), key: seal.NewKey([]byte("the deployment's key, 32 bytes.!")), events: events.NewBus(100, nil)}
	var err error
	r.b, err = natsinbox.Start(t.Context(), conn.NC, conn.JS, []natsinbox.Agent{{Name: "a", Target: r.tgt, Cap: 10}},
		natsinbox.Options{Subjects: subjects, Stream: "AGENTS", MaxBytes: 4096, AckWait: ackWait, Store: st, Seal: r.key, Events: r.events})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.b.Stop)
	return r
}

func (r *rig) publish(t *testing.T, subject, id, body string) {
	t.Helper()
	if _, err := r.conn.JS.Publish(t.Context(), subject, []byte(body), jetstream.WithMsgID(id)); err != nil {
		t.Fatal(err)
	}
}

func (r *rig) ackPending(t *testing.T, consumer string) int {
	t.Helper()
	c, err := r.conn.JS.Consumer(t.Context(), "AGENTS", consumer)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.NumAckPending
}

// A message whose turn completed must not reach a second turn, however
// long recording its handled id takes: before, the receipt left the
// waiting set before the id was written, so a redelivery in between
// (AckWait passing, a reconnect) was queued again.
func TestRedeliveryWhileSettlingIsNotQueuedAgain(t *testing.T) {
	t.Parallel()
	const ackWait = time.Second
	r := newRig(t, slowHandled{Store: memory.New(nil), hold: 3 * ackWait}, ackWait)
	r.publish(t, "agents.a.inbox", "job-1", `{"text": "rotate the certificates", "id": "job-1"}`)
	var m inbox.Message
	select {
	case m = <-r.tgt.sent:
	case <-time.After(deadline):
		t.Fatal("message not delivered")
	}
	m.Receipt.Handled() // the turn completed; its id is written slowly
	end := time.Now().Add(deadline)
	for r.ackPending(t, "agent-a") != 0 {
		if n := r.tgt.count(); n > 1 {
			t.Fatalf("the message was queued again while its handled id was being written (%d sends)", n)
		}
		if time.Now().After(end) {
			t.Fatal("never acked")
		}
		<-time.After(10 * time.Millisecond)
	}
	if n := r.tgt.count(); n != 1 {
		t.Fatalf("%d sends, want 1", n)
	}
}

func TestWakeAndDeferredHaveTheirOwnConsumers(t *testing.T) {
	t.Parallel()
	r := newRig(t, memory.New(nil), 30*time.Second)
	for i := range 15 { // more than the cap of 10
		r.publish(t, "agents.a.deferred", "d-"+string(rune('a'+i)), "background note")
	}
	r.publish(t, "agents.a.inbox", "w-1", "page")
	kinds := map[inbox.Kind]int{}
	for kinds[inbox.Wake] == 0 || kinds[inbox.Deferred] < 10 {
		select {
		case m := <-r.tgt.sent:
			kinds[m.Kind]++
		case <-time.After(deadline):
			t.Fatalf("delivered %v; want the wake message and 10 deferred", kinds)
		}
	}
	if p := r.ackPending(t, "deferred-a"); p != 10 {
		t.Fatalf("deferred consumer holds %d, want its cap of 10 (the rest stay in the stream)", p)
	}
	if p := r.ackPending(t, "agent-a"); p != 1 {
		t.Fatalf("wake consumer holds %d, want 1", p)
	}
}

func (s slowHandled) Update(ctx context.Context, key string, v []byte, rev uint64) (uint64, error) {
	if err := s.wait(ctx, key); err != nil {
		return 0, err
	}
	return s.Store.Update(ctx, key, v, rev)
}
