package natsinbox

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/natsbus"
	"github.com/agent-worker/agent-worker/seal"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/turnlog"
)

// Options configure a Binding.
type Options struct {
	Subjects natsbus.Subjects
	// Stream is the JetStream stream holding the agents' input.
	Stream string
	// MaxBytes bounds a body (nats.max_message_bytes).
	MaxBytes int
	// Store keeps dead-letter records (turnlog.DeadLetter, kept
	// DeadLetterTTL) and the cursors of agents whose subscribe: subjects
	// overlap another agent's (the purge floor).
	Store store.Store
	// DuplicateWindow is the stream's duplicate window: a message with a
	// Nats-Msg-Id is purged no sooner than this after it arrived, so a
	// retry of its publish is still a duplicate after a server restart.
	// Zero: purged as soon as settled.
	DuplicateWindow time.Duration
	// DeadLetterTTL is how long the record of a dead-lettered message is
	// kept. Default 24h.
	DeadLetterTTL time.Duration
	Events        *events.Bus
	Log           *slog.Logger
	Clock         clock.Clock
	// Leased: wake an agent only after Bind (when this replica holds its
	// lease); otherwise every agent is bound at Start.
	Leased bool
	// Seal is the deployment's key: only a message sealed with it has its
	// HeaderVia and HeaderSender claims granted. The zero Key grants
	// none.
	Seal seal.Key
	// Holder names this replica in the record of who binds which
	// subscribe: subject (binders.go); "" is "default".
	Holder string
	// Live reports whether the named replica still runs (its lease
	// record); a replica that does not has its section of the binders
	// record dropped. Nil: sections are never dropped.
	Live func(ctx context.Context, holder string) (bool, error)
	// ReadAheadBytes bounds the window of routed messages kept for the
	// agents' next reads (nats.read_ahead_bytes): 0 is
	// DefaultReadAheadBytes, negative keeps none (every read asks the
	// stream).
	ReadAheadBytes int64
}

// Binding is the agents' input on NATS for one replica: with JetStream,
// the log (one router, reads from cursors, purges below them, dead
// letters); in core NATS mode, plain subscriptions. Stop it to release
// what it holds.
type Binding struct {
	opts   Options
	nc     *nats.Conn
	js     jetstream.JetStream // nil in core NATS mode
	stream jetstream.Stream    // nil in core NATS mode
	// roster maps each configured agent to its inputs, with the
	// subscribe: patterns; a reload replaces it whole (roster.go).
	roster  atomic.Pointer[roster]
	records *turnlog.Log // dead-letter records; nil without a store
	// binders is the replicas' shared record of who binds which
	// subscribe: subject since when (binders.go); nil without a store.
	binders *binders

	router jetstream.ConsumeContext // nil in core NATS mode
	// routed is the newest sequence the router has routed (from the
	// start's last sequence on): every message at or below it has
	// reached the inputs it belongs to.
	routed atomic.Uint64
	purger *purger
	// win holds the messages routed to the agents served here until
	// their cursors pass them (window.go); reads counts the reads it
	// served whole (window) and those that went to the stream.
	win   *window
	reads struct{ window, stream atomic.Uint64 }
	// unknown takes what the router found for agents that are not
	// configured, to dead-letter off the router's callback.
	unknown chan unknownMsg
	// leftSaid is when input left for another replica's agent was last
	// said, per agent (unknown.go; its goroutine only).
	leftSaid map[string]time.Time
	work     sync.WaitGroup
	stopped  chan struct{}
	once     sync.Once

	mu   sync.Mutex
	subs map[string][]*nats.Subscription // core mode: each bound agent's
	all  []*nats.Subscription            // core mode: unknown agents'
}

// Start starts the agents' input for this replica. With js it reads the
// stream as a log: it takes the stream's last sequence, starts the router
// after it, and then finds every input with messages waiting (start.go).
// With js nil it runs in core NATS mode (at most once: core.go).
func Start(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, agents []Agent, opts Options) (*Binding, error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	if opts.DeadLetterTTL == 0 {
		opts.DeadLetterTTL = turnlog.DefaultTTL
	}
	if opts.ReadAheadBytes == 0 {
		opts.ReadAheadBytes = DefaultReadAheadBytes
	}
	b := &Binding{opts: opts, nc: nc, js: js, subs: map[string][]*nats.Subscription{}, stopped: make(chan struct{}),
		win: &window{max: opts.ReadAheadBytes}}
	b.roster.Store(layout(agents, opts.Subjects))
	if opts.Store != nil {
		b.records = turnlog.New(opts.Store, opts.Log)
		b.binders = newBinders(opts.Store, opts.Holder, opts.Live, opts.Log, opts.Clock.Now)
	}
	var err error
	if js == nil {
		err = b.startCore()
	} else {
		err = b.startLog(ctx)
	}
	if err != nil {
		b.Stop()
		return nil, err
	}
	if !opts.Leased {
		for name := range b.lineup() {
			if err := b.Bind(ctx, name); err != nil {
				b.Stop()
				return nil, err
			}
		}
	}
	return b, nil
}

// Bind makes this replica serve the agent (it holds its lease; at Start
// for every agent when not leased): the router wakes it for news, and its
// loop reads its log. In core NATS mode it subscribes to the agent's
// subjects. Binding a bound agent is a no-op.
func (b *Binding) Bind(_ context.Context, name string) error {
	a := b.agent(name)
	if a == nil {
		return fmt.Errorf("bind: unknown agent %q", name)
	}
	if b.js == nil {
		return b.subscribeCore(a)
	}
	if !a.owned.Swap(true) {
		a.to().Notify() // news that came while another replica served it
	}
	return nil
}

// Unbind stops serving the agent here: no more wakes for its news (its
// messages stay in the log for the next owner, who reads them from the
// agent's cursors). In core NATS mode it unsubscribes.
func (b *Binding) Unbind(name string) {
	a := b.agent(name)
	if a == nil {
		return
	}
	a.owned.Store(false)
	if b.js == nil {
		b.unsubscribeCore(name)
		return
	}
	for _, in := range a.inputs {
		b.win.clear(in)
	}
}

// ReadAhead returns the bytes the window holds, and how many reads of an
// agent's input it served whole and how many went to the stream.
func (b *Binding) ReadAhead() (held int64, fromWindow, fromStream uint64) {
	return b.win.size(), b.reads.window.Load(), b.reads.stream.Load()
}

// Routed returns the newest stream sequence the router has routed: every
// message at or below it has reached the inputs it belongs to (and woken
// their owners).
func (b *Binding) Routed() uint64 { return b.routed.Load() }

// Stop stops the router and the purger, waits for dead letters being
// written, and in core NATS mode unsubscribes. Messages stay in the log.
func (b *Binding) Stop() {
	b.once.Do(func() {
		close(b.stopped)
		if b.router != nil {
			b.router.Stop()
		}
		b.mu.Lock()
		var subs []*nats.Subscription
		for _, ss := range b.subs {
			subs = append(subs, ss...)
		}
		subs = append(subs, b.all...)
		b.subs, b.all = map[string][]*nats.Subscription{}, nil
		b.mu.Unlock()
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
		b.work.Wait()
		if b.records != nil {
			// Dead-letter records still being written finish, within bounds.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := b.records.Flush(ctx); err != nil {
				b.opts.Log.Warn("dead-letter records not all written before stop", "error", err)
			}
			cancel()
		}
	})
}

func (b *Binding) emit(agent, typ string, data map[string]any) {
	if b.opts.Events != nil {
		b.opts.Events.Publish(events.Event{Time: b.opts.Clock.Now(), Agent: agent, Type: typ, Data: data})
	}
}
