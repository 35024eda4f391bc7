package membership

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/internal/wait"
)

func natsServer(t *testing.T) string {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(ns.Shutdown)
	return ns.ClientURL()
}

type node struct {
	*Members
	nc       *nats.Conn
	mu       sync.Mutex
	changes  int
	released []string
}

func join(t *testing.T, url, holder string) *node {
	t.Helper()
	return joinEvery(t, url, holder, 50*time.Millisecond)
}

func joinEvery(t *testing.T, url, holder string, interval time.Duration) *node {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	n := &node{nc: nc}
	m, err := Start(context.Background(), Options{Conn: nc, Subject: Subject("agents"), Holder: holder, Interval: interval,
		Held:       func() []string { return []string{holder + "-agent"} },
		OnChange:   func() { n.mu.Lock(); n.changes++; n.mu.Unlock() },
		OnReleased: func(agent, from string) { n.mu.Lock(); n.released = append(n.released, agent+"<"+from); n.mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	n.Members = m
	t.Cleanup(func() { m.Close(); nc.Close() })
	return n
}

func TestMembersSeeEachOtherAndDropTheDeadAndTheLeaving(t *testing.T) {
	t.Parallel()
	url := natsServer(t)
	// Heartbeats every 300ms: a member is dead after 900ms of silence,
	// which tells a drop on leaving (at once) from one by timeout.
	const every = 300 * time.Millisecond
	a, b, c := joinEvery(t, url, "a", every), joinEvery(t, url, "b", every), joinEvery(t, url, "c", every)
	all := []string{"a", "b", "c"}
	for _, n := range []*node{a, b, c} {
		wait.Within(t, 10*time.Second, n.Holder()+" sees all", func() bool { return slices.Equal(n.Live(), all) })
	}
	// The newcomer learnt of the others from their answers to its join.
	if ms := c.Members.Members(); len(ms) != 2 || ms[0].Holder != "a" || !slices.Equal(ms[0].Agents, []string{"a-agent"}) {
		t.Fatalf("c's members: %+v", ms)
	}

	// c leaves: dropped at once (well before 3 heartbeats).
	start := time.Now()
	c.Leave()
	wait.Within(t, 10*time.Second, "c dropped on leaving", func() bool {
		return slices.Equal(a.Live(), []string{"a", "b"}) && slices.Equal(b.Live(), []string{"a", "b"})
	})
	if d := time.Since(start); d >= Misses*every {
		t.Errorf("leaving took %v to be seen: not at once", d)
	}
	if slices.Contains(c.Live(), "c") {
		t.Error("a replica that left still counts itself")
	}

	// b dies (its connection is cut): dropped within 3 heartbeats and one.
	start = time.Now()
	b.nc.Close()
	wait.Within(t, 10*time.Second, "b dropped", func() bool { return slices.Equal(a.Live(), []string{"a"}) })
	if d := time.Since(start); d < Misses*every || d > 5*Misses*every {
		t.Errorf("b dropped after %v, want after 3 heartbeats (900ms-1.2s)", d)
	}
	a.mu.Lock()
	changes := a.changes
	a.mu.Unlock()
	if changes < 4 { // b joined, c joined, c left, b gone
		t.Errorf("a saw %d changes, want at least 4", changes)
	}
}

func TestReleasedNoticeReachesOnlyItsReplica(t *testing.T) {
	t.Parallel()
	url := natsServer(t)
	a, b, c := join(t, url, "a"), join(t, url, "b"), join(t, url, "c")
	a.Released("x", "b")
	wait.Within(t, 10*time.Second, "b told", func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.released) == 1 })
	c.nc.Flush()
	b.mu.Lock()
	got := b.released[0]
	b.mu.Unlock()
	c.mu.Lock()
	other := len(c.released)
	c.mu.Unlock()
	if got != "x<a" || other != 0 {
		t.Fatalf("b got %q, c got %d notices", got, other)
	}
}

func TestAssignerFollowsTheLiveSet(t *testing.T) {
	t.Parallel()
	url := natsServer(t)
	a := join(t, url, "a")
	agents := names("agent-", 30)
	as := NewAssigner(a.Members, agents, nil)
	for _, ag := range agents {
		if as.Place(ag).Owner != "a" {
			t.Fatal("alone, a should own everything")
		}
	}
	b := join(t, url, "b")
	wait.Within(t, 10*time.Second, "a sees b", func() bool { return len(a.Live()) == 2 })
	n := 0
	for _, ag := range agents {
		if as.Place(ag).Owner == "b" {
			n++
		}
	}
	if n != 15 {
		t.Fatalf("b placed %d agents, want 15", n)
	}
	_ = b
}

// Joining with a context that has no deadline announces the replica
// without a warning (the flush gets a deadline of its own). On the old
// code every start logged "could not announce this replica".
func TestStartAnnouncesWithoutAWarning(t *testing.T) {
	t.Parallel()
	nc, err := nats.Connect(natsServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var logs strings.Builder
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &logs}, nil))
	m, err := Start(context.Background(), Options{Conn: nc, Subject: Subject("agents"), Holder: "r1", Log: log})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	mu.Lock()
	defer mu.Unlock()
	if strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("start warned:\n%s", logs.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A heartbeat lists the agents held only when they changed (and to a
// newcomer, and every listEvery beats): at 10,000 agents a list is 150 KB
// of JSON a second. The others keep the last list they got.
func TestHeartbeatsListTheAgentsOnlyWhenTheyChange(t *testing.T) {
	t.Parallel()
	url := natsServer(t)
	watch, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(watch.Close)
	beats := make(chan message, 1000)
	sub, err := watch.Subscribe(Subject("agents"), func(m *nats.Msg) {
		var msg message
		if json.Unmarshal(m.Data, &msg) == nil && msg.Holder == "a" && msg.Kind == kindHeartbeat {
			beats <- msg
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := watch.Flush(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	held := []string{"x", "y"}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	a, err := Start(context.Background(), Options{Conn: nc, Subject: Subject("agents"), Holder: "a", Interval: 20 * time.Millisecond,
		Held: func() []string { mu.Lock(); defer mu.Unlock(); return held }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	b := join(t, url, "b")
	next := func() message {
		t.Helper()
		select {
		case m := <-beats:
			return m
		case <-time.After(10 * time.Second):
			t.Fatal("no heartbeat from a")
			return message{}
		}
	}
	if m := next(); !slices.Equal(m.Agents, []string{"x", "y"}) || m.Same {
		t.Fatalf("a's first heartbeat: %+v, want its agents listed", m)
	}
	same := 0
	for range 5 {
		if m := next(); m.Same && m.Agents == nil {
			same++
		}
	}
	if same < 3 { // b's join makes a answer with a full list once or twice
		t.Fatalf("%d of 5 heartbeats left the unchanged agents out; want most", same)
	}
	wait.Within(t, 10*time.Second, "b to know a's agents", func() bool {
		ms := b.Members.Members()
		return len(ms) == 1 && slices.Equal(ms[0].Agents, []string{"x", "y"})
	})
	mu.Lock()
	held = []string{"x", "y", "z"}
	mu.Unlock()
	wait.Within(t, 10*time.Second, "b to see a's new agent", func() bool {
		ms := b.Members.Members()
		return len(ms) == 1 && slices.Equal(ms[0].Agents, []string{"x", "y", "z"})
	})
}
