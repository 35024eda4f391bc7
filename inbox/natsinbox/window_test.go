package natsinbox_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// directGets counts the batch direct gets made on the input stream.
func directGets(t *testing.T, r *rig) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	for _, subj := range []string{"$JS.API.DIRECT.GET.AGENTS", "$JS.API.DIRECT.GET.AGENTS.>"} {
		sub, err := r.conn.NC.Subscribe(subj, func(*nats.Msg) { n.Add(1) })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := r.conn.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	return &n
}

// texts reads agent a's next n messages.
func texts(t *testing.T, r *rig, n int) []string {
	t.Helper()
	var out []string
	for range n {
		out = append(out, r.next(t).Text)
	}
	return out
}

func wantTexts(t *testing.T, got []string, from, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("read %d messages, want %d: %q", len(got), n, got)
	}
	for i, s := range got {
		if want := fmt.Sprintf("m%d", from+i); s != want {
			t.Fatalf("message %d reads %q, want %q (all: %q)", i, s, want, got)
		}
	}
}

// Messages routed while the agent is served here are read from the
// window: no request to the stream.
func TestRoutedMessagesAreReadFromTheWindow(t *testing.T) {
	t.Parallel()
	r := newRig(t, memstore.New(nil))
	gets := directGets(t, r)
	for i := range 20 {
		r.publish(t, "agents.a.inbox", "", fmt.Sprintf("m%d", i))
	}
	wantTexts(t, texts(t, r, 20), 0, 20)
	r.settle("a")
	r.publish(t, "agents.a.inbox", "", "m20")
	wantTexts(t, texts(t, r, 1), 20, 1)
	if n := gets.Load(); n != 0 {
		t.Fatalf("%d direct gets for messages the router had routed; want 0", n)
	}
}

// A window too small for the backlog drops its oldest messages; the
// reads it cannot serve whole go to the stream, and every message is read
// once, in order.
func TestAWindowTooSmallFallsBackToTheStream(t *testing.T) {
	t.Parallel()
	conn, subjects := startServer(t)
	r := &rig{conn: conn, subjects: subjects, st: memstore.New(nil), readAhead: 1024}
	r.start(t)
	gets := directGets(t, r)
	last := r.publish(t, "agents.a.inbox", "", "m0")
	for i := 1; i < 50; i++ {
		last = r.publish(t, "agents.a.inbox", "", fmt.Sprintf("m%d", i))
	}
	wait.For(t, "the router to route every message", func() bool { return r.b.Routed() >= last })
	res := r.read(t, "a", 100)
	got := []string{}
	for _, m := range res.Messages {
		got = append(got, m.Text)
	}
	wantTexts(t, got, 0, 50)
	wait.For(t, "a direct get: a backlog beyond the window was read without asking the stream", func() bool { return gets.Load() > 0 })
}

// An agent served elsewhere while its messages came (bound here later)
// reads them from the stream; what comes after it is bound, from the
// window.
func TestAnAgentBoundLaterReadsWhatCameBeforeFromTheStream(t *testing.T) {
	t.Parallel()
	conn, subjects := startServer(t)
	r := &rig{conn: conn, subjects: subjects, st: memstore.New(nil), leased: true}
	b := r.start(t)
	gets := directGets(t, r)
	last := r.publish(t, "agents.a.inbox", "", "m0")
	wait.For(t, "the router to route it", func() bool { return b.Routed() >= last })
	if err := b.Bind(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	wantTexts(t, texts(t, r, 1), 0, 1)
	wait.For(t, "a direct get: a message routed before the agent was bound was read without asking the stream", func() bool { return gets.Load() > 0 })
	r.settle("a")
	before := gets.Load()
	r.publish(t, "agents.a.inbox", "", "m1")
	wantTexts(t, texts(t, r, 1), 1, 1)
	if gets.Load() != before {
		t.Fatal("a message routed after the agent was bound was read from the stream")
	}
}

// Messages waiting when the log starts are read from the stream; what
// the router routes afterwards, from the window.
func TestMessagesWaitingAtStartAreReadFromTheStream(t *testing.T) {
	t.Parallel()
	conn, subjects := startServer(t)
	r := &rig{conn: conn, subjects: subjects, st: memstore.New(nil)}
	r.publish(t, "agents.a.inbox", "", "m0")
	r.start(t)
	gets := directGets(t, r)
	wantTexts(t, texts(t, r, 1), 0, 1)
	wait.For(t, "a direct get: a message waiting at start was read without asking the stream", func() bool { return gets.Load() > 0 })
}
