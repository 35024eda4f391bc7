package distributed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/background"
	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/internal/textclip"
	"github.com/agent-worker/agent-worker/natsbus"
)

// Timeouts of the distributed mode.
const (
	// fetchWait is how long one pull for a job waits on the server.
	fetchWait = 5 * time.Second
	// admitTimeout is how long one admit request waits for the parent's
	// owner; without an answer the request is repeated (after
	// retryPause) until the subagent ends.
	admitTimeout = 2 * time.Second
	retryPause   = 500 * time.Millisecond
	// publishTimeout bounds one JetStream publish (job, charge, report).
	publishTimeout = 10 * time.Second
	// chargeGiveUp is how long a charge record is retried before the
	// subagent fails for want of charging its parent.
	chargeGiveUp = 30 * time.Second
	// storeTimeout bounds one registry or claim operation.
	storeTimeout = 10 * time.Second
	// chargeMemory is how long a charge record's claimed key is kept: at
	// least as long as the stream keeps an unacked record (its max age).
	chargeMemory = 7 * 24 * time.Hour
	// runnersConsumer is the durable consumer every replica pulls jobs
	// from; a parent's charges have the durable chargesPrefix+parent.
	runnersConsumer = "subagent-runners"
	chargesPrefix   = "charges-"
)

// New returns the distributed mode to set as
// background.Options.Distributed: background.New calls it once, with the
// Manager's Host and its Options (defaults filled), whose Clock, Log,
// Charger and Replica serve this mode too.
func New(o Options) func(background.Host, background.Options) background.Distributed {
	return func(h background.Host, bo background.Options) background.Distributed { return newQueue(h, bo, o) }
}

// queue is the distributed mode of one Manager.
type queue struct {
	h       background.Host
	o       Options
	log     *slog.Logger
	clock   clock.Clock
	charger background.Charger // nil: no guardrails
	replica string
	reg     registryStore

	stream   jetstream.Stream
	cons     jetstream.Consumer
	slots    chan struct{} // one per job running here
	take     context.Context
	stopTake context.CancelFunc
	loopDone chan struct{} // closed when the take loop ended; nil if it never ran
	subs     []*nats.Subscription
	halts    chan notice   // halts seen by Halted, for the publisher
	done     chan struct{} // closed by Close
	doneOnce sync.Once

	ownMu  sync.Mutex
	owned  map[string]*ownership
	closed bool

	countMu sync.Mutex
	counts  map[string]int // the last live count read per parent
}

func newQueue(h background.Host, bo background.Options, o Options) *queue {
	o = o.withDefaults()
	take, stop := context.WithCancel(context.Background())
	return &queue{h: h, o: o, log: bo.Log, clock: bo.Clock, charger: bo.Charger, replica: bo.Replica,
		reg: registryStore{o.Store}, take: take, stopTake: stop,
		halts: make(chan notice, 256), done: make(chan struct{}),
		owned: map[string]*ownership{}, counts: map[string]int{}}
}

// seal seals a message of the subagent protocol (jobs, charge records,
// notices, admissions) with the deployment's key, over its subject, its
// Nats-Msg-Id and its data; sealed tells whether one checks. A message of
// the protocol that does not check is a stranger's — a forged job would
// spend money, a forged charge move a parent's spend — and is refused
// (forged).
func (q *queue) seal(m *nats.Msg) { q.o.Seal.SealMsg(m, nats.MsgIdHdr) }

func (q *queue) sealed(subject string, h nats.Header, data []byte) bool {
	return q.o.Seal.CheckMsg(subject, h, data, nats.MsgIdHdr)
}

// forged logs a subagent protocol message without the deployment's seal.
func (q *queue) forged(what, subject string, data []byte) {
	q.log.Error("subagent "+what+" without the deployment's seal refused: a publisher on the worker's internal subjects forges them, or a replica of an older version sent it",
		"subject", subject, "data", textclip.Runes(string(data), 200, "…"))
}

// Start ensures the stream, subscribes to admits and notices, and starts
// taking jobs.
func (q *queue) Start(ctx context.Context) error {
	o := &q.o
	if o.NATS == nil || o.Store == nil {
		return errors.New("background: distributed subagents need NATS and a store")
	}
	s := o.Subjects
	stream, err := q.ensureStream(ctx)
	if err != nil {
		return err
	}
	q.ownMu.Lock()
	q.stream = stream
	q.ownMu.Unlock()
	for subj, h := range map[string]nats.MsgHandler{s.AllSubagentAdmits(): q.onAdmit, s.AllSubagentNotices(): q.onNotice} {
		sub, err := o.NATS.Subscribe(subj, h)
		if err != nil {
			return fmt.Errorf("subscribe %s: %w", subj, err)
		}
		q.subs = append(q.subs, sub)
	}
	if err := o.NATS.Flush(); err != nil {
		return err
	}
	go q.publishHalts()
	if o.MaxPerReplica <= 0 {
		q.log.Info("subagents: this replica runs none (subagents.max_per_replica 0); other replicas run them")
		return nil
	}
	q.cons, err = stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       runnersConsumer,
		Description:   "agent-worker: subagent jobs, pulled by every replica with room",
		FilterSubject: s.SubagentJobs(),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       o.AckWait,
		MaxDeliver:    -1, // MaxRuns is counted here, so a job is never dropped unreported
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("consumer %s on stream %s: %w", runnersConsumer, o.Stream, err)
	}
	q.slots = make(chan struct{}, o.MaxPerReplica)
	q.loopDone = make(chan struct{})
	go q.takeJobs()
	q.log.Info("subagents run here", "max_per_replica", o.MaxPerReplica, "stream", o.Stream, "replica", q.replica)
	return nil
}

// ensureStream creates (or updates) the work-queue stream of jobs and
// charges.
func (q *queue) ensureStream(ctx context.Context) (jetstream.Stream, error) {
	o := &q.o
	return natsbus.EnsureStream(ctx, o.JetStream, natsbus.StreamSpec{
		Name:            o.Stream,
		Description:     "agent-worker: subagent jobs and the charges of their spend",
		Subjects:        []string{o.Subjects.SubagentJobs(), o.Subjects.AllSubagentCharges()},
		DuplicateWindow: o.DuplicateWindow,
		WorkQueue:       true,
		Replicas:        o.Replicas,
		MaxConsumers:    o.MaxConsumers,
	}, q.log)
}

// Close stops consuming charges, answering admits and notices.
func (q *queue) Close() {
	q.stopTake()
	q.ownMu.Lock()
	q.closed = true
	var stops []func()
	for _, o := range q.owned {
		if o.stop != nil {
			stops = append(stops, o.stop)
			o.stop = nil
		}
		o.ready = false
	}
	q.ownMu.Unlock()
	for _, stop := range stops {
		stop()
	}
	for _, s := range q.subs {
		_ = s.Unsubscribe()
	}
	q.subs = nil
	q.doneOnce.Do(func() { close(q.done) })
}

// knows reports whether parent is registered with the Manager here.
func (q *queue) knows(parent string) bool {
	_, known, _ := q.h.Here(parent, "")
	return known
}
