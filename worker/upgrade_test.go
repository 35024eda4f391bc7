package worker

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/events"
)

// A worker started on a server whose input stream has the consumer
// layout of the versions before the log — interest retention, the
// agent's two durable consumers, some messages acknowledged — converts it
// and handles every message that was still queued, once, and none that
// was acknowledged. (A data dir the older binary wrote was converted the
// same way by hand: see docs/operations.md, upgrading.)
func TestAStreamOfTheConsumerLayoutIsConvertedAndEveryQueuedMessageHandledOnce(t *testing.T) {
	t.Parallel()
	url := natsExternal(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ctx := t.Context()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "AGENTS", Subjects: []string{"agents.*.inbox", "agents.*.deferred"},
		Retention: jetstream.InterestPolicy, Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute, Metadata: map[string]string{"agent-worker": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []jetstream.ConsumerConfig{
		{Durable: "agent-triage", FilterSubjects: []string{"agents.triage.inbox"}, AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 256},
		{Durable: "deferred-triage", FilterSubjects: []string{"agents.triage.deferred"}, AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 256},
		{Durable: "unknown-agents", FilterSubjects: []string{"agents.*.inbox", "agents.*.deferred"}, AckPolicy: jetstream.AckNonePolicy, DeliverPolicy: jetstream.DeliverNewPolicy},
	} {
		if _, err := s.CreateOrUpdateConsumer(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	publish := func(subject, id string) {
		t.Helper()
		if _, err := js.Publish(ctx, subject, []byte("message "+id), jetstream.WithMsgID(id)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 6; i++ {
		publish("agents.triage.inbox", fmt.Sprintf("w-%d", i))
	}
	publish("agents.triage.deferred", "d-1")
	publish("agents.triage.deferred", "d-2")
	// The older worker handled w-1..w-3 and d-1 before it stopped.
	for c, n := range map[string]int{"agent-triage": 3, "deferred-triage": 1} {
		cons, _ := s.Consumer(ctx, c)
		batch, err := cons.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}

	rec := newRecorder()
	r := start(t, writeConfig(t, setup{natsURL: url}), rec, nil)
	e := r.waitEvent(events.TurnCompleted)
	ids, _ := e.Data["ids"].([]string)
	if got := strings.Join(ids, " "); got != "w-4 w-5 w-6 d-2" {
		t.Fatalf("the first turn after the upgrade handled %q, want w-4 w-5 w-6 d-2", got)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Retention != jetstream.LimitsPolicy || !info.Config.AllowDirect || info.State.Consumers != 1 { // the router
		t.Fatalf("after the upgrade: retention %v, allow_direct %v, %d consumers", info.Config.Retention, info.Config.AllowDirect, info.State.Consumers)
	}
	r.publish("agents.triage.inbox", "after the upgrade")
	e = r.waitEvent(events.TurnCompleted)
	if ids, _ := e.Data["ids"].([]string); len(ids) != 1 || slices.ContainsFunc(ids, func(id string) bool { return strings.HasPrefix(id, "w-") || strings.HasPrefix(id, "d-") }) {
		t.Fatalf("second turn: %v", e.Data)
	}
}
