package eventstream

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/natsbus"
)

// deadline bounds every wait; waits end as soon as their condition holds.
const deadline = 20 * time.Second

// rig is a real nats-server with JetStream, in process, and a connection.
type rig struct {
	t  *testing.T
	nc *nats.Conn
	js jetstream.JetStream
}

func newRig(t *testing.T) *rig {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(ns.Shutdown)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, nc: nc, js: js}
}

func (r *rig) open(o Options) *Stream {
	r.t.Helper()
	o.Conn = r.nc
	if o.Name == "" {
		o.Name = "AGENTS_EVENTS"
	}
	o.Subjects = natsbus.Subjects{Prefix: "agents"}
	s, err := Open(context.Background(), o)
	if err != nil {
		r.t.Fatal(err)
	}
	return s
}

// record stores bus's events in s until the test ends.
func record(t *testing.T, s *Stream, bus *events.Bus) {
	stop := s.Record(bus)
	t.Cleanup(func() { stop(deadline) })
}

func follow(t *testing.T, s *Stream, f events.Follow) events.Tail {
	t.Helper()
	tl, err := s.Follow(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tl.Close)
	return tl
}

func next(t *testing.T, tl events.Tail) events.Item {
	t.Helper()
	select {
	case it, ok := <-tl.Items():
		if !ok {
			t.Fatalf("tail ended: %v", tl.Err())
		}
		return it
	case <-time.After(deadline):
		t.Fatal("no item from the tail")
	}
	return events.Item{}
}

func wantEvent(t *testing.T, it events.Item, seq uint64, agent, typ string) events.Event {
	t.Helper()
	e := it.Event
	if it.Gap != nil || e.Seq != seq || e.Agent != agent || e.Type != typ {
		t.Fatalf("item %+v (gap %+v), want event %d %s of %s", e, it.Gap, seq, typ, agent)
	}
	return e
}

// waitStored waits until the stream holds n events.
func (r *rig) waitStored(name string, n uint64) {
	r.t.Helper()
	end := time.Now().Add(deadline)
	for {
		st, err := r.js.Stream(context.Background(), name)
		if err == nil && st.CachedInfo().State.Msgs == n {
			return
		}
		if time.Now().After(end) {
			r.t.Fatalf("stream %s does not hold %d events (%v)", name, n, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Events recorded from a bus come back from the stream with the stream
// sequence as id, the replica that published them, their agent and
// type; a tail replays after an id, filtered by agent, then follows.
func TestRecordedEventsReplayAfterAnIDThenFollowLive(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	s := r.open(Options{Replica: "r1"})
	bus := events.NewBus(0, nil)
	record(t, s, bus)
	bus.Publish(events.Event{Agent: "a", Type: events.TurnStarted})
	bus.Publish(events.Event{Agent: "b", Type: events.Paused, Data: map[string]any{"by": "ops"}})
	bus.Publish(events.Event{Agent: "a", Type: events.TurnCompleted})
	r.waitStored("AGENTS_EVENTS", 3)

	all := follow(t, s, events.Follow{Replay: true})
	wantEvent(t, next(t, all), 1, "a", events.TurnStarted)
	paused := wantEvent(t, next(t, all), 2, "b", events.Paused)
	if paused.Replica != "r1" || paused.Data["by"] != "ops" || paused.Time.IsZero() {
		t.Fatalf("read back %+v", paused)
	}
	wantEvent(t, next(t, all), 3, "a", events.TurnCompleted)

	onlyA := follow(t, s, events.Follow{Replay: true, After: 1, Agent: "a"})
	wantEvent(t, next(t, onlyA), 3, "a", events.TurnCompleted)
	live := follow(t, s, events.Follow{Filter: func(e events.Event) bool { return e.Type != events.Wake }})
	bus.Publish(events.Event{Agent: "b", Type: events.Wake})
	bus.Publish(events.Event{Agent: "a", Type: events.Resumed})
	wantEvent(t, next(t, onlyA), 5, "a", events.Resumed)
	wantEvent(t, next(t, live), 5, "a", events.Resumed)

	// What a nats consumer reads: JSON on the event subject, without the
	// bus's sequence number.
	st, err := r.js.Stream(context.Background(), "AGENTS_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetMsg(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(m.Data, &raw); err != nil {
		t.Fatal(err)
	}
	if m.Subject != "agents.b.events.paused" || raw["seq"] != nil || raw["replica"] != "r1" || raw["agent"] != "b" {
		t.Fatalf("stored %s: %s", m.Subject, m.Data)
	}
}

// A tail that resumes from an id the stream no longer holds starts with
// a gap that says where the events go on; so does one from an id beyond
// the stream's newest (a stream created anew).
func TestFollowSaysGapWhenTheStreamLostEvents(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	s := r.open(Options{})
	bus := events.NewBus(0, nil)
	record(t, s, bus)
	for range 5 {
		bus.Publish(events.Event{Agent: "a", Type: events.Wake})
	}
	r.waitStored("AGENTS_EVENTS", 5)
	st, err := r.js.Stream(context.Background(), "AGENTS_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	// As events.max_age would: everything before 4 is gone.
	if err := st.Purge(context.Background(), jetstream.WithPurgeSequence(4)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ after, first uint64 }{{1, 4}, {99, 4}} {
		tl := follow(t, s, events.Follow{Replay: true, After: c.after})
		if it := next(t, tl); it.Gap == nil || *it.Gap != (events.Gap{After: c.after, FirstSeq: c.first}) {
			t.Fatalf("after %d: first item %+v (gap %+v), want a gap to %d", c.after, it.Event, it.Gap, c.first)
		}
		wantEvent(t, next(t, tl), 4, "a", events.Wake)
		wantEvent(t, next(t, tl), 5, "a", events.Wake)
	}
	// From an id it still holds: no gap.
	tl := follow(t, s, events.Follow{Replay: true, After: 4})
	wantEvent(t, next(t, tl), 5, "a", events.Wake)
}

// Events that find the buffer full, and publishes JetStream does not
// acknowledge, are counted; the bus and its other subscribers never wait.
func TestUnstoredEventsAreCounted(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	s := r.open(Options{Buffer: 2})
	held, release := make(chan struct{}, 1), make(chan struct{})
	s.publishing = func(e events.Event) {
		if e.Type == "hold" {
			held <- struct{}{}
			<-release
		}
	}
	bus := events.NewBus(0, nil)
	record(t, s, bus)
	bus.Publish(events.Event{Agent: "a", Type: "hold"})
	<-held // the publisher has the first event in hand; the buffer takes two more
	for range 7 {
		bus.Publish(events.Event{Agent: "a", Type: events.Wake})
	}
	if full, failed := s.Unstored(); full != 5 || failed != 0 {
		t.Fatalf("unstored: overflow %d, failed %d; want 5, 0", full, failed)
	}
	close(release)
	r.waitStored("AGENTS_EVENTS", 3)

	if err := r.js.DeleteStream(context.Background(), "AGENTS_EVENTS"); err != nil {
		t.Fatal(err)
	}
	bus.Publish(events.Event{Agent: "a", Type: events.Wake})
	end := time.Now().Add(deadline)
	for {
		if _, failed := s.Unstored(); failed == 1 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("a publish to a deleted stream is not counted as failed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := s.Follow(context.Background(), events.Follow{}); err == nil {
		t.Fatal("Follow of a deleted stream succeeded")
	}
}

// Open creates a limits-based stream with the given limits, brings them
// up to date on the next start, and refuses subjects another stream
// holds.
func TestOpenKeepsTheLimitsAndRefusesTakenSubjects(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.open(Options{MaxAge: time.Hour, MaxBytes: 2 << 20})
	r.open(Options{MaxAge: 2 * time.Hour, MaxBytes: 4 << 20})
	st, err := r.js.Stream(context.Background(), "AGENTS_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	if cfg.Retention != jetstream.LimitsPolicy || cfg.MaxAge != 2*time.Hour || cfg.MaxBytes != 4<<20 || cfg.Discard != jetstream.DiscardOld ||
		len(cfg.Subjects) != 1 || cfg.Subjects[0] != "agents.*.events.>" {
		t.Fatalf("stream config %+v", cfg)
	}

	other := newRig(t)
	if _, err := other.js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "MINE", Subjects: []string{"agents.>"}}); err != nil {
		t.Fatal(err)
	}
	_, err = Open(context.Background(), Options{Conn: other.nc, Name: "AGENTS_EVENTS"})
	if !errors.Is(err, ErrSubjectsTaken) {
		t.Fatalf("Open over another stream's subjects: %v", err)
	}
}
