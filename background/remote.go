package background

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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

// remote is the distributed mode of a Manager.
type remote struct {
	m   *Manager
	reg registryStore

	stream   jetstream.Stream
	cons     jetstream.Consumer
	slots    chan struct{} // one per job running here
	take     context.Context
	stopTake context.CancelFunc
	loopDone chan struct{} // closed when the take loop ended; nil if it never ran
	subs     []*nats.Subscription
	halts    chan notice   // halts seen by observe, for the publisher
	done     chan struct{} // closed by close
	doneOnce sync.Once

	ownMu  sync.Mutex
	owned  map[string]*ownership
	closed bool

	countMu sync.Mutex
	counts  map[string]int // the last live count read per parent
}

func newRemote(m *Manager) *remote {
	o := &m.o
	if o.Stream == "" {
		o.Stream = "AGENTS_SUBAGENTS"
	}
	if o.DuplicateWindow <= 0 {
		o.DuplicateWindow = 2 * time.Minute
	}
	if o.AckWait <= 0 {
		o.AckWait = 30 * time.Second
	}
	if o.MaxRuns <= 0 {
		o.MaxRuns = 3
	}
	if o.ReportMaxBytes <= 0 {
		o.ReportMaxBytes = 64 << 10
	}
	if o.Subjects.Prefix == "" {
		o.Subjects.Prefix = "agents"
	}
	take, stop := context.WithCancel(context.Background())
	return &remote{m: m, reg: registryStore{o.Store}, take: take, stopTake: stop,
		halts: make(chan notice, 256), done: make(chan struct{}),
		owned: map[string]*ownership{}, counts: map[string]int{}}
}

func (r *remote) opts() *Options { return &r.m.o }

// seal seals a message of the subagent protocol (jobs, charge records,
// notices, admissions) with the deployment's key, over its subject, its
// Nats-Msg-Id and its data; sealed tells whether one checks. A message of
// the protocol that does not check is a stranger's — a forged job would
// spend money, a forged charge move a parent's spend — and is refused
// (forged).
func (r *remote) seal(m *nats.Msg) { r.opts().Seal.SealMsg(m, nats.MsgIdHdr) }

func (r *remote) sealed(subject string, h nats.Header, data []byte) bool {
	return r.opts().Seal.CheckMsg(subject, h, data, nats.MsgIdHdr)
}

// forged logs a subagent protocol message without the deployment's seal.
func (r *remote) forged(what, subject string, data []byte) {
	r.opts().Log.Error("subagent "+what+" without the deployment's seal refused: a publisher on the worker's internal subjects forges them, or a replica of an older version sent it",
		"subject", subject, "data", textclip.Runes(string(data), 200, "…"))
}

// start ensures the stream, subscribes to admits and notices, and starts
// taking jobs.
func (r *remote) start(ctx context.Context) error {
	o := r.opts()
	if o.NATS == nil || o.Store == nil {
		return errors.New("background: distributed subagents need NATS and a store")
	}
	s := o.Subjects
	stream, err := ensureStream(ctx, o)
	if err != nil {
		return err
	}
	r.ownMu.Lock()
	r.stream = stream
	r.ownMu.Unlock()
	for subj, h := range map[string]nats.MsgHandler{s.AllSubagentAdmits(): r.onAdmit, s.AllSubagentNotices(): r.onNotice} {
		sub, err := o.NATS.Subscribe(subj, h)
		if err != nil {
			return fmt.Errorf("subscribe %s: %w", subj, err)
		}
		r.subs = append(r.subs, sub)
	}
	if err := o.NATS.Flush(); err != nil {
		return err
	}
	go r.publishHalts()
	if o.MaxPerReplica <= 0 {
		o.Log.Info("subagents: this replica runs none (subagents.max_per_replica 0); other replicas run them")
		return nil
	}
	r.cons, err = stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
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
	r.slots = make(chan struct{}, o.MaxPerReplica)
	r.loopDone = make(chan struct{})
	go r.takeJobs()
	o.Log.Info("subagents run here", "max_per_replica", o.MaxPerReplica, "stream", o.Stream, "replica", o.Replica)
	return nil
}

// ensureStream creates (or updates) the work-queue stream of jobs and
// charges.
func ensureStream(ctx context.Context, o *Options) (jetstream.Stream, error) {
	return natsbus.EnsureStream(ctx, o.JetStream, natsbus.StreamSpec{
		Name:            o.Stream,
		Description:     "agent-worker: subagent jobs and the charges of their spend",
		Subjects:        []string{o.Subjects.SubagentJobs(), o.Subjects.AllSubagentCharges()},
		DuplicateWindow: o.DuplicateWindow,
		WorkQueue:       true,
		Replicas:        o.Replicas,
		MaxConsumers:    o.MaxConsumers,
	}, o.Log)
}

// close stops consuming charges, answering admits and notices.
func (r *remote) close() {
	r.stopTake()
	r.ownMu.Lock()
	r.closed = true
	var stops []func()
	for _, o := range r.owned {
		if o.stop != nil {
			stops = append(stops, o.stop)
			o.stop = nil
		}
		o.ready = false
	}
	r.ownMu.Unlock()
	for _, stop := range stops {
		stop()
	}
	for _, s := range r.subs {
		_ = s.Unsubscribe()
	}
	r.subs = nil
	r.doneOnce.Do(func() { close(r.done) })
}
