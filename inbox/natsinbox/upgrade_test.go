package natsinbox_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/inbox/natsinbox"
	"github.com/agent-worker/agent-worker/natsbus"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// oldLayout makes the input stream as the versions before the log did:
// interest retention, and for agent "a" a durable consumer of its wake
// input and one of its deferred input, acked by hand here as its handled
// turns did; plus the consumer of unknown agents' input.
func oldLayout(t *testing.T, js jetstream.JetStream) jetstream.Stream {
	t.Helper()
	ctx := t.Context()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "AGENTS", Subjects: []string{"agents.*.inbox", "agents.*.deferred", "alerts.>"},
		Retention: jetstream.InterestPolicy, Storage: jetstream.FileStorage, Duplicates: time.Minute, Metadata: map[string]string{"agent-worker": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []jetstream.ConsumerConfig{
		{Durable: "agent-a", FilterSubjects: []string{"agents.a.inbox", "alerts.>"}, AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 10},
		{Durable: "deferred-a", FilterSubjects: []string{"agents.a.deferred"}, AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 10},
		{Durable: "unknown-agents", FilterSubjects: []string{"agents.*.inbox", "agents.*.deferred"}, AckPolicy: jetstream.AckNonePolicy, DeliverPolicy: jetstream.DeliverNewPolicy},
	} {
		if _, err := s.CreateOrUpdateConsumer(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// ack acks the first n messages consumer holds, as the old layout did
// after their turn was recorded.
func ack(t *testing.T, s jetstream.Stream, consumer string, n int) {
	t.Helper()
	c, err := s.Consumer(t.Context(), consumer)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := c.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for m := range batch.Messages() {
		if err := m.DoubleAck(t.Context()); err != nil {
			t.Fatal(err)
		}
		got++
	}
	if got != n {
		t.Fatalf("%s: fetched %d, want %d", consumer, got, n)
	}
}

// A stream of the consumer layout is converted in place: every message
// its consumers had not acknowledged is read once from the agent's first
// cursors, none it had is read again, and the old consumers are gone.
func TestUpgradeFromTheConsumerLayoutReadsEachQueuedMessageOnce(t *testing.T) {
	t.Parallel()
	conn, err := natsbus.Connect(config.NATS{Listen: "-1"}, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	s := oldLayout(t, conn.JS)
	r := &rig{conn: conn, subjects: natsbus.Subjects{Prefix: "agents"}, st: memstore.New(nil)}
	for i := 1; i <= 5; i++ {
		r.publish(t, "agents.a.inbox", fmt.Sprintf("w-%d", i), "wake")
	}
	for i := 1; i <= 3; i++ {
		r.publish(t, "agents.a.deferred", fmt.Sprintf("d-%d", i), "later")
	}
	r.publish(t, "alerts.db", "x-1", "disk full")
	ack(t, s, "agent-a", 2)    // w-1, w-2 handled
	ack(t, s, "deferred-a", 1) // d-1 handled

	agents := []natsinbox.Agent{{Name: "a", Subscribe: []config.Subscription{{Subject: "alerts.>", Mode: "inbox"}}}}
	if err := natsinbox.Upgrade(t.Context(), conn.JS, "AGENTS", agents, r.subjects, r.st, nil); err != nil {
		t.Fatal(err)
	}
	// The next start finds nothing to do.
	if err := natsinbox.Upgrade(t.Context(), conn.JS, "AGENTS", agents, r.subjects, r.st, nil); err != nil {
		t.Fatalf("a second upgrade: %v", err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Retention != jetstream.LimitsPolicy || info.State.Consumers != 0 {
		t.Fatalf("after the upgrade: retention %v, %d consumers", info.Config.Retention, info.State.Consumers)
	}
	var cursors inbox.Cursors
	if _, err := store.GetJSON(t.Context(), r.st, inbox.CursorsKey("a"), &cursors); err != nil {
		t.Fatal(err)
	}
	if _, err := natsbus.EnsureStream(t.Context(), conn.JS, inputStream(r.subjects, "alerts.>"), nil); err != nil {
		t.Fatalf("the converted stream as the worker wants it: %v", err)
	}

	r.start(t, agents...)
	tg := r.agents["a"]
	tg.read = cursors
	var ids []string
	for range 6 {
		ids = append(ids, r.next(t).ID)
	}
	if fmt.Sprint(ids) != "[w-3 w-4 w-5 x-1 d-2 d-3]" {
		t.Fatalf("read after the upgrade: %v (cursors %v)", ids, cursors)
	}
	if res := r.read(t, "a", 100); len(res.Messages) != 0 {
		t.Fatalf("read again: %+v", res.Messages)
	}
}
