package natsinbox_test

import (
	"log/slog"
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
)

const deadline = 20 * time.Second

// target is an agent as the log sees it: it counts the router's news and
// keeps its own read position and cursors, as the driver does.
type target struct {
	news chan struct{}
	sent chan inbox.Message // core NATS mode

	mu      sync.Mutex
	read    inbox.Cursors
	cursors inbox.Cursors
	queued  []inbox.Message
}

func newTarget() *target {
	return &target{news: make(chan struct{}, 1), sent: make(chan inbox.Message, 100), read: inbox.Cursors{}, cursors: inbox.Cursors{}}
}

func (t *target) Send(m inbox.Message) { t.sent <- m }

func (t *target) Notify() {
	select {
	case t.news <- struct{}{}:
	default:
	}
}

type rig struct {
	conn     *natsbus.Conn
	subjects natsbus.Subjects
	b        *natsinbox.Binding
	st       store.Store
	agents   map[string]*target
	// key is the deployment's sealing key the log checks.
	key seal.Key
	// events sees the log's events.
	events *events.Bus
	// window is the logs' DuplicateWindow (default none).
	window time.Duration
	// readAhead is the logs' ReadAheadBytes (default: the default).
	readAhead int64
	// leased: agents are served only once bound (Options.Leased).
	leased bool
}

// inputStream is the agents' input stream as the worker makes it.
func inputStream(subjects natsbus.Subjects, extra ...string) natsbus.StreamSpec {
	return natsbus.StreamSpec{Name: "AGENTS", DuplicateWindow: time.Minute, Limits: true, AllowDirect: true, DiscardNew: true, MaxAge: -1,
		Subjects: append([]string{subjects.AllInboxes(), subjects.AllDeferred()}, extra...)}
}

// startServer starts an embedded NATS server with the agents' input
// stream over subjects' inboxes, deferred subjects and extra.
func startServer(t *testing.T, extra ...string) (*natsbus.Conn, natsbus.Subjects) {
	t.Helper()
	conn, err := natsbus.Connect(config.NATS{Listen: "-1"}, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	subjects := natsbus.Subjects{Prefix: "agents"}
	if _, err := natsbus.EnsureStream(t.Context(), conn.JS, inputStream(subjects, extra...), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if _, err := natsbus.EnsureStream(t.Context(), conn.JS, natsinbox.DeadLetterStream("AGENTS_DLQ", subjects, 0, 0, 1), nil); err != nil {
		t.Fatal(err)
	}
	return conn, subjects
}

// newRig starts a log on a new server for agent "a" (and any agents
// given, with their subscribe: subjects in the stream), all served here.
func newRig(t *testing.T, st store.Store, agents ...natsinbox.Agent) *rig {
	t.Helper()
	var extra []string
	for _, a := range agents {
		for _, s := range a.Subscribe {
			extra = append(extra, s.Subject)
		}
	}
	conn, subjects := startServer(t, extra...)
	r := &rig{conn: conn, subjects: subjects, st: st, key: seal.NewKey([]byte("the deployment's key, 32 bytes.!")), events: events.NewBus(100, nil)}
	r.start(t, agents...)
	return r
}

// start starts (another) log on r's server: another replica.
func (r *rig) start(t *testing.T, agents ...natsinbox.Agent) *natsinbox.Binding {
	t.Helper()
	if len(agents) == 0 {
		agents = []natsinbox.Agent{{Name: "a"}}
	}
	if r.agents == nil {
		r.agents = map[string]*target{}
	}
	for i := range agents {
		tg := r.agents[agents[i].Name]
		if tg == nil {
			tg = newTarget()
			r.agents[agents[i].Name] = tg
		}
		agents[i].Target = tg
	}
	b, err := natsinbox.Start(t.Context(), r.conn.NC, r.conn.JS, agents,
		natsinbox.Options{Subjects: r.subjects, Stream: "AGENTS", MaxBytes: 4096, Store: r.st, Seal: r.key, Events: r.events, DuplicateWindow: r.window, ReadAheadBytes: r.readAhead, Leased: r.leased})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	if r.b == nil {
		r.b = b
	}
	return b
}

func (r *rig) publish(t *testing.T, subject, id, body string) uint64 {
	t.Helper()
	opts := []jetstream.PublishOpt{}
	if id != "" {
		opts = append(opts, jetstream.WithMsgID(id))
	}
	ack, err := r.conn.JS.Publish(t.Context(), subject, []byte(body), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

// read reads agent's news as its loop would: from its read position,
// with room for n of each kind; the messages join its queue.
func (r *rig) read(t *testing.T, agent string, n int) inbox.LogRead {
	t.Helper()
	tg := r.agents[agent]
	tg.mu.Lock()
	from := tg.read
	tg.mu.Unlock()
	res, err := r.b.Read(t.Context(), agent, from, inbox.Room{Wake: n, Deferred: n})
	if err != nil {
		t.Fatal(err)
	}
	tg.mu.Lock()
	tg.read = tg.read.Merge(res.Through)
	tg.queued = append(tg.queued, res.Messages...)
	tg.mu.Unlock()
	return res
}

// next waits for agent a's news and returns its next message.
func (r *rig) next(t *testing.T) inbox.Message {
	t.Helper()
	return r.nextOf(t, "a")
}

func (r *rig) nextOf(t *testing.T, agent string) inbox.Message {
	t.Helper()
	tg := r.agents[agent]
	end := time.After(deadline)
	for {
		tg.mu.Lock()
		if len(tg.queued) > 0 {
			m := tg.queued[0]
			tg.queued = tg.queued[1:]
			tg.mu.Unlock()
			return m
		}
		tg.mu.Unlock()
		select {
		case <-tg.news:
			r.read(t, agent, 100)
		case <-end:
			t.Fatalf("no message for %s", agent)
			return inbox.Message{}
		}
	}
}

// settle stores agent's cursors as through its read position (a turn
// recorded everything read) and tells the log.
func (r *rig) settle(agent string) inbox.Cursors {
	tg := r.agents[agent]
	tg.mu.Lock()
	tg.cursors = tg.cursors.Merge(tg.read)
	c := tg.cursors
	tg.mu.Unlock()
	r.b.Settled(agent, c)
	return c
}

// held counts the messages the stream holds on subject filter.
func (r *rig) held(t *testing.T, filter string) int {
	t.Helper()
	s, err := r.conn.JS.Stream(t.Context(), "AGENTS")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context(), jetstream.WithSubjectFilter(filter))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range info.State.Subjects {
		n += int(c)
	}
	return n
}
