package natsinbox_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/inbox/natsinbox"
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/store/memstore"
	"github.com/nats-io/nats.go/jetstream"
)

// The router wakes the agent for news; a read returns the messages after
// the reader's position, oldest first, each with its place in the log;
// once the cursors are stored past them they are purged, and a read from
// the cursors finds only what came later.
func TestAReadStartsWhereTheAgentStandsAndSettledMessagesArePurged(t *testing.T) {
	t.Parallel()
	r := newRig(t, memstore.New(nil))
	for i := 1; i <= 3; i++ {
		r.publish(t, "agents.a.inbox", fmt.Sprintf("m-%d", i), fmt.Sprintf(`{"text": "alert %d"}`, i))
	}
	for i := 1; i <= 3; i++ {
		m := r.next(t)
		if m.ID != fmt.Sprintf("m-%d", i) || m.Kind != inbox.Wake || m.Pos.Input != "agents.a.inbox" || m.Pos.Seq != uint64(i) || m.Received.IsZero() {
			t.Fatalf("message %d: %+v", i, m)
		}
	}
	if c := r.settle("a"); c["agents.a.inbox"] != 3 {
		t.Fatalf("cursors %v after reading three", c)
	}
	wait.For(t, "the settled messages purged", func() bool { return r.held(t, "agents.a.>") == 0 })
	r.publish(t, "agents.a.deferred", "d-1", "background")
	if m := r.next(t); m.ID != "d-1" || m.Kind != inbox.Deferred || m.Pos.Seq != 4 {
		t.Fatalf("after the purge: %+v", m)
	}
}

// A read takes at most the room it is given, wake inputs' room apart
// from deferred ones', and says how many wait: a deferred backlog never
// takes a wake message's place, and is read as room frees up.
func TestAReadTakesItsRoomAndSaysHowManyWait(t *testing.T) {
	t.Parallel()
	r := newRig(t, memstore.New(nil))
	for i := range 25 {
		r.publish(t, "agents.a.deferred", fmt.Sprintf("d-%d", i), "background note")
	}
	last := r.publish(t, "agents.a.inbox", "w-1", "page")
	wait.For(t, "routed", func() bool { return r.b.Routed() >= last })
	res, err := r.b.Read(t.Context(), "a", nil, inbox.Room{Wake: 10, Deferred: 10})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[inbox.Kind]int{}
	for _, m := range res.Messages {
		kinds[m.Kind]++
	}
	if kinds[inbox.Wake] != 1 || kinds[inbox.Deferred] != 10 || res.Waiting != 15 {
		t.Fatalf("read %v, %d waiting; want the wake message, 10 deferred and 15 waiting", kinds, res.Waiting)
	}
	if res.Through["agents.a.deferred"] != 10 || res.Through["agents.a.inbox"] != 26 {
		t.Fatalf("through %v", res.Through)
	}
	res, err = r.b.Read(t.Context(), "a", res.Through, inbox.Room{Wake: 10, Deferred: 10})
	if err != nil || len(res.Messages) != 10 || res.Messages[0].ID != "d-10" || res.Waiting != 5 {
		t.Fatalf("second read: %d messages from %v, %d waiting (%v)", len(res.Messages), res.Messages[0].ID, res.Waiting, err)
	}
}

// What waits in the log before the worker starts is found at the start:
// the agent is told, and a read from its cursors returns it.
func TestTheStartFindsWhatWaits(t *testing.T) {
	t.Parallel()
	conn, subjects := startServer(t)
	r := &rig{conn: conn, subjects: subjects, st: memstore.New(nil)}
	r.publish(t, "agents.a.inbox", "early-1", "published while no worker ran")
	r.publish(t, "agents.a.deferred", "early-2", "this too")
	r.start(t)
	if m := r.next(t); m.ID != "early-1" {
		t.Fatalf("first: %+v", m)
	}
	if m := r.next(t); m.ID != "early-2" {
		t.Fatalf("second: %+v", m)
	}
}

// A body the worker cannot use is dead-lettered by the read, counted, and
// passed: the read goes on to the next message.
func TestABadBodyIsDeadLetteredAndPassed(t *testing.T) {
	t.Parallel()
	r := newRig(t, memstore.New(nil))
	dlq, err := r.conn.NC.SubscribeSync("agents.a.dlq")
	if err != nil {
		t.Fatal(err)
	}
	r.publish(t, "agents.a.inbox", "bad-1", `{"text": `)
	last := r.publish(t, "agents.a.inbox", "good-1", "fine")
	wait.For(t, "routed", func() bool { return r.b.Routed() >= last })
	res, err := r.b.Read(t.Context(), "a", nil, inbox.Room{Wake: 10, Deferred: 10})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rejected != 1 || len(res.Messages) != 1 || res.Messages[0].ID != "good-1" || res.Through["agents.a.inbox"] != 2 {
		t.Fatalf("read %+v", res)
	}
	m, err := dlq.NextMsg(deadline)
	if err != nil || m.Header.Get(natsinbox.HeaderRejectReason) != inbox.RejectInvalidJSON || m.Header.Get(natsinbox.HeaderMessageID) != "bad-1" {
		t.Fatalf("dead letter %v, %v", m, err)
	}
}

// Input for an agent nobody configured is dead-lettered once however
// many replicas route it, and removed from the log.
func TestInputForAnUnknownAgentIsDeadLetteredOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	r := newRig(t, memstore.New(nil))
	r.start(t) // a second replica on the same stream
	r.publish(t, "agents.ghost.inbox", "ghost-1", "anyone?")
	wait.For(t, "removed from the log", func() bool { return r.held(t, "agents.ghost.>") == 0 })
	s, err := r.conn.JS.Stream(t.Context(), "AGENTS_DLQ")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("%d dead letters of one message routed by two replicas, want 1", info.State.Msgs)
	}
}

// Two agents that bind one subject — one as inbox, one as deferred — each
// get every message on it; it is purged only once both have settled it.
func TestASharedSubjectReachesBothAgentsAndIsPurgedAfterBoth(t *testing.T) {
	t.Parallel()
	r := newRig(t, memstore.New(nil),
		natsinbox.Agent{Name: "a", Subscribe: []config.Subscription{{Subject: "alerts.>", Mode: "inbox"}}},
		natsinbox.Agent{Name: "b", Subscribe: []config.Subscription{{Subject: "alerts.>", Mode: "deferred"}}})
	r.publish(t, "alerts.db", "x-1", "disk full")
	ma, mb := r.nextOf(t, "a"), r.nextOf(t, "b")
	if ma.ID != "x-1" || ma.Kind != inbox.Wake || mb.ID != "x-1" || mb.Kind != inbox.Deferred || ma.Pos.Input != "alerts.>" {
		t.Fatalf("a got %+v, b got %+v", ma, mb)
	}
	r.settle("a")
	r.b.Settled("a", inbox.Cursors{"alerts.>": 1}) // and again: the purger has run since
	if n := r.held(t, "alerts.>"); n != 1 {
		t.Fatalf("the shared subject holds %d after only a settled it, want 1", n)
	}
	r.settle("b")
	wait.For(t, "purged once both settled", func() bool { return r.held(t, "alerts.>") == 0 })
}

// Overlapping patterns (alerts.> and alerts.prod.>): a message on both is
// kept until both agents settled it; one only the wider pattern matches is
// not held back by the narrower agent, which has settled all it was sent.
func TestOverlappingPatternsArePurgedBelowBothCursors(t *testing.T) {
	t.Parallel()
	r := newRig(t, memstore.New(nil),
		natsinbox.Agent{Name: "wide", Subscribe: []config.Subscription{{Subject: "alerts.>", Mode: "inbox"}}},
		natsinbox.Agent{Name: "prod", Subscribe: []config.Subscription{{Subject: "alerts.prod.>", Mode: "inbox"}}})
	r.publish(t, "alerts.dev.web", "dev-1", "flaky test")
	if m := r.nextOf(t, "wide"); m.ID != "dev-1" {
		t.Fatalf("wide got %+v", m)
	}
	r.settle("wide")
	wait.For(t, "a message only the wide pattern matches purged", func() bool { return r.held(t, "alerts.dev.>") == 0 })

	r.publish(t, "alerts.prod.db", "prod-1", "disk full")
	if m := r.nextOf(t, "wide"); m.ID != "prod-1" {
		t.Fatalf("wide got %+v", m)
	}
	if m := r.nextOf(t, "prod"); m.ID != "prod-1" {
		t.Fatalf("prod got %+v", m)
	}
	r.settle("wide")
	r.settle("wide")
	if n := r.held(t, "alerts.prod.>"); n != 1 {
		t.Fatalf("alerts.prod.db purged before prod settled it (%d held)", n)
	}
	r.settle("prod")
	wait.For(t, "purged once both settled", func() bool { return r.held(t, "alerts.>") == 0 })
}

// A full subject refuses its own publisher with a clear error; another
// agent's subject still takes messages.
func TestAFullSubjectRefusesItsPublisherOnly(t *testing.T) {
	t.Parallel()
	r := newRig(t, memstore.New(nil), natsinbox.Agent{Name: "a"}, natsinbox.Agent{Name: "b"})
	s, err := r.conn.JS.Stream(t.Context(), "AGENTS")
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.MaxMsgsPerSubject = 2
	cfg.Discard, cfg.DiscardNewPerSubject = jetstream.DiscardNew, true
	if _, err := r.conn.JS.UpdateStream(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	r.publish(t, "agents.a.inbox", "", "one")
	r.publish(t, "agents.a.inbox", "", "two")
	_, err = r.conn.JS.Publish(t.Context(), "agents.a.inbox", []byte("three"))
	if err == nil || !strings.Contains(err.Error(), "maximum messages per subject exceeded") {
		t.Fatalf("third publish to a full subject: %v", err)
	}
	if _, err := r.conn.JS.Publish(t.Context(), "agents.b.inbox", []byte("still fine")); err != nil {
		t.Fatalf("another agent's publisher refused too: %v", err)
	}
}

// A message with a Nats-Msg-Id stays in the log for the stream's
// duplicate window after it was settled, so the server, which rebuilds
// its duplicate ids from what it holds after a restart, still knows it;
// then it is purged. One without an id is purged at once.
func TestAMessageWithAnIDOutlivesItsSettleByTheDuplicateWindow(t *testing.T) {
	t.Parallel()
	conn, subjects := startServer(t)
	r := &rig{conn: conn, subjects: subjects, st: memstore.New(nil)}
	r.window = 5 * time.Second
	r.start(t)
	r.publish(t, "agents.a.inbox", "", "no id")
	r.publish(t, "agents.a.inbox", "retry-me", "with an id")
	r.next(t)
	r.next(t)
	r.settle("a")
	wait.For(t, "the message without an id purged", func() bool { return r.held(t, "agents.a.inbox") == 1 })
	if ack, err := r.conn.JS.Publish(t.Context(), "agents.a.inbox", []byte("with an id"), jetstream.WithMsgID("retry-me")); err != nil || !ack.Duplicate {
		t.Fatalf("a retry within the window: %+v, %v; want a duplicate", ack, err)
	}
	wait.For(t, "purged once its window passed", func() bool { return r.held(t, "agents.a.inbox") == 0 })
}

// A message with an id that the router never saw (it waited in the log
// when the worker started, or the reader got to it first) is still held
// for its duplicate window: the reader notes its id too.
func TestAMessageWithAnIDTheRouterDidNotSeeIsHeldForItsWindow(t *testing.T) {
	t.Parallel()
	conn, subjects := startServer(t)
	r := &rig{conn: conn, subjects: subjects, st: memstore.New(nil)}
	r.window = time.Minute
	r.publish(t, "agents.a.inbox", "", "no id")
	r.publish(t, "agents.a.inbox", "retry-me", "with an id")
	r.start(t)
	r.next(t)
	r.next(t)
	r.settle("a")
	wait.For(t, "a purge", func() bool { return r.held(t, "agents.a.inbox") < 2 })
	if n := r.held(t, "agents.a.inbox"); n != 1 {
		t.Fatalf("the log holds %d message(s) after the purge; want 1 (the one with an id, inside its window)", n)
	}
}

// Every replica's router sees every message: each has a consumer of its
// own (replicas that shared one's name took it from each other, and only
// the last replica started routed anything).
func TestEveryReplicasRouterSeesEveryMessage(t *testing.T) {
	t.Parallel()
	r := newRig(t, memstore.New(nil))
	replicas := []*natsinbox.Binding{r.b, r.start(t), r.start(t)}
	var last uint64
	for range 20 {
		last = r.publish(t, "agents.a.inbox", "", "x")
	}
	for i, b := range replicas {
		wait.For(t, fmt.Sprintf("replica %d routed all", i+1), func() bool { return b.Routed() >= last })
	}
}
