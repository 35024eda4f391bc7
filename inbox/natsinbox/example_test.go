package natsinbox_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/inbox/natsinbox"
	"github.com/agent-worker/agent-worker/natsbus"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// newsOf is an agent's loop as the log sees it: told of news, it reads.
type newsOf chan struct{}

func (n newsOf) Send(inbox.Message) {} // core NATS mode only
func (n newsOf) Notify() {
	select {
	case n <- struct{}{}:
	default:
	}
}

// The agents' input on JetStream: the stream is the log. A wake message
// and a deferred one are published; the router tells the agent it has
// news, and the agent reads them from its cursors (zero: nothing handled
// yet), each with its place in the log. The messages stay in the stream
// until a recorded turn's cursors pass them (Settled).
func Example() {
	dir, err := os.MkdirTemp("", "natsinbox-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	conn, err := natsbus.Connect(config.NATS{Listen: "-1"}, dir, nil)
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	subjects := natsbus.Subjects{Prefix: "agents"}
	stream := natsbus.StreamSpec{Name: "AGENTS", Limits: true, AllowDirect: true, DiscardNew: true, MaxAge: -1,
		Subjects: []string{subjects.AllInboxes(), subjects.AllDeferred()}}
	for _, spec := range []natsbus.StreamSpec{stream, natsinbox.DeadLetterStream("AGENTS_DLQ", subjects, 0, 0, 1)} {
		if _, err := natsbus.EnsureStream(ctx, conn.JS, spec, nil); err != nil {
			panic(err)
		}
	}
	news := make(newsOf, 1)
	b, err := natsinbox.Start(ctx, conn.NC, conn.JS, []natsinbox.Agent{{Name: "oncall", Target: news}},
		natsinbox.Options{Subjects: subjects, Stream: "AGENTS", MaxBytes: 4096, Store: memstore.New(nil)})
	if err != nil {
		panic(err)
	}
	defer b.Stop()

	if _, err := conn.JS.Publish(ctx, subjects.Deferred("oncall"), []byte(`{"text": "weekly report due friday", "id": "note-1"}`)); err != nil {
		panic(err)
	}
	if _, err := conn.JS.Publish(ctx, subjects.Inbox("oncall"), []byte(`{"text": "disk 91% on db-2", "id": "alert-1"}`)); err != nil {
		panic(err)
	}
	read := inbox.Cursors{}
	var got []inbox.Message
	for len(got) < 2 {
		<-news
		r, err := b.Read(ctx, "oncall", read, inbox.Room{Wake: 10, Deferred: 10})
		if err != nil {
			panic(err)
		}
		read = read.Merge(r.Through)
		got = append(got, r.Messages...)
	}
	slices.SortFunc(got, func(a, b inbox.Message) int { return cmp.Compare(a.Pos.Seq, b.Pos.Seq) })
	for _, m := range got {
		fmt.Printf("seq %d %s %s: %s\n", m.Pos.Seq, m.Kind, m.ID, m.Text)
	}
	// Output:
	// seq 1 deferred note-1: weekly report due friday
	// seq 2 inbox alert-1: disk 91% on db-2
}
