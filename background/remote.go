package background

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/inbox/natsinbox"
	"github.com/agent-worker/agent-worker/natsbus"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/tracing"
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

// job is a queued subagent, the body of a message on
// <prefix>._subagents.jobs (Nats-Msg-Id: ID).
type job struct {
	ID     string    `json:"id"`
	Parent string    `json:"parent"`
	Task   string    `json:"task"`
	Queued time.Time `json:"queued"`
	// TraceParent is the spawning turn's trace context, if traced: the
	// run links to it.
	TraceParent string `json:"traceparent,omitempty"`
	// Key is the spawn's idempotency key (Manager.SpawnKeyed), if any.
	Key string `json:"key,omitempty"`
}

// chargeRecord is one model call's cost, the body of a message on
// <prefix>._subagents.charges.<parent> (Nats-Msg-Id:
// charge-<id>-<run>-<call>). (ID, Run, Call) is its idempotency key.
type chargeRecord struct {
	Parent string  `json:"parent"`
	ID     string  `json:"id"`
	Run    int     `json:"run"`
	Call   int     `json:"call"`
	USD    float64 `json:"usd"`
}

// notice is a halt or stop, the body of a message on
// <prefix>._subagents.notice.<parent>.
type notice struct {
	Op     string `json:"op"` // "halt" or "stop"
	Parent string `json:"parent"`
	ID     string `json:"id,omitempty"`     // stop
	Reason string `json:"reason,omitempty"` // halt: why the parent is halted
	By     string `json:"by,omitempty"`     // stop: who asked
}

// admitRequest asks the parent's owner whether a subagent may call its
// model; admitReply is the answer.
type admitRequest struct {
	Parent string `json:"parent"`
	ID     string `json:"id"`
}

type admitReply struct {
	OK     bool   `json:"ok"`
	Reason string `json:"reason,omitempty"`
}

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

// ownership is what this replica knows of owning a parent.
type ownership struct {
	// ready: owned here and its guardrails restored since it was
	// acquired, so charges may be applied and admits answered.
	ready bool
	gen   int    // bumped on every change, to discard stale binds
	stop  func() // stops consuming the parent's charges; nil if not
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
		"subject", subject, "data", clipRunes(string(data), 200))
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

// takeJobs pulls one job per free slot until stopTaking.
func (r *remote) takeJobs() {
	defer close(r.loopDone)
	o := r.opts()
	for {
		select {
		case r.slots <- struct{}{}:
		case <-r.take.Done():
			return
		}
		ctx, cancel := context.WithTimeout(r.take, fetchWait)
		msg, err := r.cons.Next(jetstream.FetchContext(ctx))
		cancel()
		if err != nil {
			<-r.slots
			if r.take.Err() != nil {
				return
			}
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
				o.Log.Warn("subagents: cannot pull a job; retrying", "error", err)
				select {
				case <-time.After(time.Second):
				case <-r.take.Done():
					return
				}
			}
			continue
		}
		if !r.begin(msg) {
			<-r.slots
		}
	}
}

// stopTaking stops pulling jobs and waits until the take loop is gone,
// so no job starts afterwards.
func (r *remote) stopTaking() {
	r.stopTake()
	if r.loopDone != nil {
		<-r.loopDone
	}
}

// begin starts running the job msg holds, or settles it: a job already
// finished is acked, one run MaxRuns times or stopped while queued is
// reported and acked, one of a parent this replica does not know is
// left for another. It reports whether a run started (it then holds a
// slot until it ends).
func (r *remote) begin(msg jetstream.Msg) bool {
	o := r.opts()
	meta, err := msg.Metadata()
	if err != nil {
		o.Log.Warn("subagent job without JetStream metadata; terminated", "error", err)
		_ = msg.Term()
		return false
	}
	if !r.sealed(msg.Subject(), msg.Headers(), msg.Data()) {
		r.forged("job", msg.Subject(), msg.Data())
		_ = msg.Term()
		return false
	}
	var j job
	if err := json.Unmarshal(msg.Data(), &j); err != nil || !token(j.ID) || !token(j.Parent) {
		o.Log.Error("unreadable subagent job; terminated", "error", err, "data", clipRunes(string(msg.Data()), 200))
		_ = msg.Term()
		return false
	}
	run := int(meta.NumDelivered)
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	var rec *Info
	if g, err := r.reg.get(ctx, j.Parent); err != nil {
		o.Log.Warn("subagent registry unreadable; running the job anyway", "agent", j.Parent, "subagent", j.ID, "error", err)
	} else {
		rec = g.Subs[j.ID]
	}
	m := r.m
	m.mu.Lock()
	f := m.parents[j.Parent]
	closing := m.closing
	var here *sub
	if f != nil {
		here = f.running[j.ID]
	}
	if here != nil {
		// Delivered again while still running here (in-progress acks
		// were lost): answer through the newest delivery.
		here.job = msg
	}
	m.mu.Unlock()
	switch {
	case here != nil:
		return false
	case rec != nil && !rec.Live():
		o.Log.Info("subagent job delivered again after it finished; acked", "agent", j.Parent, "subagent", j.ID, "state", rec.State)
		_ = msg.Ack()
		return false
	case closing:
		_ = msg.Nak()
		return false
	case run > o.MaxRuns:
		r.giveUp(j, msg, run, OutcomeFailed, fmt.Sprintf("it was started %d times and each time the replica running it stopped or died before it finished", run-1))
		return false
	case f == nil:
		o.Log.Warn("subagent job of an agent this replica does not run; left for another replica", "agent", j.Parent, "subagent", j.ID)
		_ = msg.NakWithDelay(o.AckWait)
		return false
	case rec != nil && rec.StopRequestedBy != "":
		r.giveUp(j, msg, run, OutcomeStopped, stopCause(rec.StopRequestedBy).Error()+" before it started")
		return false
	}
	runCtx, stop := context.WithCancelCause(context.Background())
	now := o.Clock.Now()
	s := &sub{id: j.ID, task: j.Task, cancel: stop, run: run, queued: j.Queued, started: now, remote: true, job: msg, link: j.TraceParent}
	if rec != nil {
		s.prior = rec.SpentUSD
	}
	m.mu.Lock()
	if m.closing {
		m.mu.Unlock()
		stop(ErrShutdown)
		_ = msg.Nak()
		return false
	}
	f.running[j.ID] = s
	m.wg.Add(1)
	m.mu.Unlock()
	r.setState(ctx, j, func(i *Info) {
		i.State, i.Replica, i.Runs, i.Started = StateRunning, o.Replica, run, &now
	})
	o.Log.Info("subagent started", "agent", j.Parent, "subagent", j.ID, "run", run, "replica", o.Replica)
	m.emit(j.Parent, EventStarted, map[string]any{"id": j.ID, "run": run, "replica": o.Replica})
	go func() {
		defer func() { <-r.slots }()
		keep := r.keepAlive(s)
		defer keep()
		m.execute(runCtx, f, s)
	}()
	return true
}

// token reports whether s can be a subject and store key token.
func token(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// jobOf returns the newest delivery of the job s runs.
func (r *remote) jobOf(s *sub) jetstream.Msg {
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	return s.job
}

// keepAlive sends in-progress acks for s's job every AckWait/3 (real
// time: the server's ack wait is) until the returned stop is called.
func (r *remote) keepAlive(s *sub) func() {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(max(r.opts().AckWait/3, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = r.jobOf(s).InProgress()
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done) }) }
}

// finish reports a finished run to its parent over NATS, records it and
// acks the job; a run stopped by this replica's shutdown (or whose report
// cannot be published before the drain ends) is handed back instead.
func (r *remote) finish(f *family, s *sub, outcome, why, text string, err, cause error) {
	o := r.opts()
	m := r.m
	if errors.Is(cause, ErrShutdown) {
		r.requeue(f.name, s)
		return
	}
	if !r.publishReport(f.name, s.id, reportText(s.id, s.task, outcome, why, text), s.trace, m.hardStop) {
		r.requeue(f.name, s)
		return
	}
	now := o.Clock.Now()
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	r.setState(ctx, job{ID: s.id, Parent: f.name, Task: s.task, Queued: s.queued}, func(i *Info) {
		i.State, i.Finished = outcome, &now
	})
	m.mu.Lock()
	spent := s.spent
	m.mu.Unlock()
	o.Log.Info("subagent finished", "agent", f.name, "subagent", s.id, "outcome", outcome, "run", s.run, "cost_usd", spent, "error", err)
	m.emit(f.name, EventFinished, map[string]any{"id": s.id, "outcome": outcome, "cost_usd": spent, "run": s.run, "replica": o.Replica})
	if err := r.jobOf(s).DoubleAck(ctx); err != nil {
		// Delivered again later, the job is seen finished and acked.
		o.Log.Warn("subagent job not acked; a redelivery will be acked as finished", "agent", f.name, "subagent", s.id, "error", err)
	}
}

// requeue hands a job this replica will not finish back to the stream,
// to be run again at once by a replica with room.
func (r *remote) requeue(parent string, s *sub) {
	o := r.opts()
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	r.setState(ctx, job{ID: s.id, Parent: parent, Task: s.task, Queued: s.queued}, func(i *Info) {
		if i.Live() {
			i.State = StateQueued
		}
	})
	if err := r.jobOf(s).Nak(); err != nil {
		o.Log.Warn("subagent job not handed back; it is delivered again after the ack wait", "agent", parent, "subagent", s.id, "error", err)
	}
	o.Log.Info("subagent handed back unfinished: another replica runs it again", "agent", parent, "subagent", s.id, "run", s.run)
	r.m.emit(parent, EventRequeued, map[string]any{"id": s.id, "run": s.run})
}

// giveUp reports a job that will not run (again) to its parent, records
// it and acks it. If the report cannot be published before this replica
// stops taking jobs, the job is handed back.
func (r *remote) giveUp(j job, msg jetstream.Msg, run int, outcome, why string) {
	o := r.opts()
	if !r.publishReport(j.Parent, j.ID, reportText(j.ID, j.Task, outcome, why, ""), "", r.take.Done()) {
		_ = msg.Nak()
		return
	}
	now := o.Clock.Now()
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	r.setState(ctx, j, func(i *Info) {
		i.State, i.Finished = outcome, &now
		if outcome == OutcomeFailed {
			i.Runs = run - 1
		}
	})
	o.Log.Warn("subagent not run", "agent", j.Parent, "subagent", j.ID, "outcome", outcome, "reason", why)
	r.m.emit(j.Parent, EventFinished, map[string]any{"id": j.ID, "outcome": outcome, "cost_usd": 0.0, "run": run, "replica": o.Replica})
	if err := msg.DoubleAck(ctx); err != nil {
		o.Log.Warn("subagent job not acked; a redelivery will be acked as finished", "agent", j.Parent, "subagent", j.ID, "error", err)
	}
}

// publishReport publishes a report to the parent's inbox subject (see
// the package documentation), retrying until JetStream has it or quit is
// closed. It reports whether it was published (or already was: a
// duplicate of the same id).
func (r *remote) publishReport(parent, id, text, traceParent string, quit <-chan struct{}) bool {
	o := r.opts()
	msg := nats.NewMsg(o.Subjects.Inbox(parent))
	tracing.SetNATS(msg.Header, traceParent)
	msg.Data = encodeReport(id, text, o.ReportMaxBytes)
	msg.Header.Set(nats.MsgIdHdr, natsbus.MsgID(parent, id))
	msg.Header.Set(natsinbox.HeaderVia, natsinbox.ViaSubagent)
	natsinbox.SealVia(o.Seal, msg)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
		ack, err := o.JetStream.PublishMsg(ctx, msg)
		cancel()
		if err == nil {
			if ack.Duplicate {
				o.Log.Info("subagent report was already published", "agent", parent, "subagent", id)
			}
			return true
		}
		o.Log.Warn("subagent report not published yet; retrying", "agent", parent, "subagent", id, "error", natsbus.Full(err))
		select {
		case <-quit:
			return false
		case <-time.After(time.Second):
		}
	}
}

// encodeReport is the report's JSON envelope (text, id, from, attributes)
// as inbox.ParseBody reads it, its text cut so that it fits limit bytes.
func encodeReport(id, text string, limit int) []byte {
	for {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(struct {
			Text       string            `json:"text"`
			ID         string            `json:"id"`
			From       string            `json:"from"`
			Attributes map[string]string `json:"attributes"`
		}{text, id, id, map[string]string{"via": natsinbox.ViaSubagent}})
		data := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		over := len(data) - limit
		if over <= 0 || len(text) == 0 {
			return data
		}
		const note = "\n[report cut to fit nats.max_message_bytes]"
		cut := max(len(text)-over-len(note)-16, 0)
		for cut > 0 && !utf8RuneStart(text[cut]) {
			cut--
		}
		if cut == 0 {
			text = ""
			continue
		}
		text = text[:cut] + note
	}
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// setState applies fn to the subagent's registry record, creating it
// from j when missing (its spawner could not write it). Failures are
// logged: the registry is what lists and counts show.
func (r *remote) setState(ctx context.Context, j job, fn func(*Info)) {
	err := r.reg.update(ctx, j.Parent, func(g *registry) error {
		i := g.Subs[j.ID]
		if i == nil {
			i = &Info{ID: j.ID, Task: clipRunes(j.Task, TaskClip), State: StateQueued, Queued: j.Queued, Key: j.Key}
			g.Subs[j.ID] = i
		}
		fn(i)
		return nil
	})
	if err != nil {
		r.opts().Log.Warn("subagent registry not updated", "agent", j.Parent, "subagent", j.ID, "error", err)
	}
}

// admit lets s make a model call: no stop recorded for it, and its
// parent's owner admits it. It waits while no owner answers.
func (r *remote) admit(ctx context.Context, f *family, s *sub) error {
	o := r.opts()
	gctx, cancel := context.WithTimeout(ctx, storeTimeout)
	g, err := r.reg.get(gctx, f.name)
	cancel()
	if err == nil {
		if i := g.Subs[s.id]; i != nil && i.StopRequestedBy != "" {
			cause := stopCause(i.StopRequestedBy)
			s.cancel(cause)
			return cause
		}
	}
	data, _ := json.Marshal(admitRequest{Parent: f.name, ID: s.id})
	waited := false
	for {
		rctx, cancel := context.WithTimeout(ctx, admitTimeout)
		reply, err := o.NATS.RequestWithContext(rctx, o.Subjects.SubagentAdmit(f.name), data)
		cancel()
		if err == nil && !r.sealed(reply.Subject, reply.Header, reply.Data) {
			// Not the owner's answer: someone else answered first.
			r.forged("admission", reply.Subject, reply.Data)
			err = errors.New("an admission without the deployment's seal")
		}
		if err == nil {
			var a admitReply
			if err := json.Unmarshal(reply.Data, &a); err != nil {
				return fmt.Errorf("unreadable admission from the parent's owner: %w", err)
			}
			if !a.OK {
				cause := haltCause(a.Reason)
				s.cancel(cause)
				return cause
			}
			return nil
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if !waited {
			waited = true
			o.Log.Warn("subagent waits: its parent's owner does not answer (the agent may be moving between replicas)", "agent", f.name, "subagent", s.id, "error", err)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(retryPause):
		}
	}
}

// charge publishes one model call's cost for the parent's owner, and
// waits until JetStream has it (retrying for chargeGiveUp). The publish
// does not depend on the subagent's context: a response received is
// charged even if the subagent is being stopped.
func (r *remote) charge(_ context.Context, f *family, s *sub, call int, usd float64) error {
	o := r.opts()
	c := chargeRecord{Parent: f.name, ID: s.id, Run: s.run, Call: call, USD: usd}
	msg := nats.NewMsg(o.Subjects.SubagentCharges(f.name))
	msg.Data, _ = json.Marshal(c)
	msg.Header.Set(nats.MsgIdHdr, "charge-"+s.id+"-"+strconv.Itoa(s.run)+"-"+strconv.Itoa(call))
	r.seal(msg)
	giveUp := time.Now().Add(chargeGiveUp)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
		_, err := o.JetStream.PublishMsg(ctx, msg)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(giveUp) {
			o.Log.Error("subagent spend not charged to its parent: the charge record could not be published", "agent", f.name,
				"subagent", s.id, "run", s.run, "call", call, "cost_usd", usd, "error", err)
			return fmt.Errorf("cannot charge its spend to its parent: %w", err)
		}
		select {
		case <-r.m.hardStop:
			o.Log.Error("subagent spend not charged to its parent: shutting down", "agent", f.name, "subagent", s.id, "cost_usd", usd, "error", err)
			return fmt.Errorf("cannot charge its spend to its parent: %w", err)
		case <-time.After(retryPause):
		}
	}
}

// spawn queues a subagent of f on task: the parent's cap is checked and
// the id drawn in one compare-and-set of its registry, then the job is
// published (Nats-Msg-Id = id) and recorded queued.
func (r *remote) spawn(f *family, task, key, link string) (string, error) {
	o := r.opts()
	f.spawnMu.Lock()
	defer f.spawnMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	var id string
	existing := false
	err := r.reg.update(ctx, f.name, func(g *registry) error {
		if i := g.byKey(key); i != nil {
			id, existing = i.ID, true // spawned before under this key: a resumed turn
			return errNoChange
		}
		if g.live() >= f.spec.Max {
			return limitError(f.spec.Max)
		}
		g.Seq++
		id = f.name + "-sub-" + strconv.Itoa(g.Seq)
		return nil
	})
	switch {
	case existing:
		o.Log.Info("subagent spawn repeated by a resumed turn; the first one stands", "agent", f.name, "subagent", id)
		return id, nil
	case errors.Is(err, ErrLimit):
		return "", err
	case err != nil:
		return "", fmt.Errorf("cannot queue a subagent now (the state store is unavailable): %w", err)
	}
	j := job{ID: id, Parent: f.name, Task: task, Queued: o.Clock.Now(), Key: key, TraceParent: link}
	msg := nats.NewMsg(o.Subjects.SubagentJobs())
	msg.Data, _ = json.Marshal(j)
	msg.Header.Set(nats.MsgIdHdr, id)
	r.seal(msg)
	pctx, pcancel := context.WithTimeout(context.Background(), publishTimeout)
	_, err = o.JetStream.PublishMsg(pctx, msg)
	pcancel()
	if err != nil {
		return "", fmt.Errorf("cannot queue a subagent now (NATS): %w", err)
	}
	err = r.reg.update(ctx, f.name, func(g *registry) error {
		if g.Subs[id] != nil {
			return errNoChange // a replica already started it
		}
		g.Subs[id] = &Info{ID: id, Task: clipRunes(task, TaskClip), State: StateQueued, Queued: j.Queued, Key: key}
		return nil
	})
	if err != nil {
		o.Log.Warn("subagent queued but not in the registry yet; the replica that runs it records it", "agent", f.name, "subagent", id, "error", err)
	}
	o.Log.Info("subagent queued", "agent", f.name, "subagent", id)
	r.m.emit(f.name, EventQueued, map[string]any{"id": id})
	return id, nil
}

// stop records a stop of parent's subagent id in the registry (so a
// queued job is reported stopped instead of run, and a runner that missed
// the notice stops at its next model call) and publishes a stop notice.
func (r *remote) stop(ctx context.Context, parent, id, by string) error {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	err := r.reg.update(ctx, parent, func(g *registry) error {
		i := g.Subs[id]
		switch {
		case i == nil:
			return fmt.Errorf("%w %q", ErrUnknown, id)
		case !i.Live():
			return fmt.Errorf("%w: %s %s", ErrFinished, id, i.State)
		case i.StopRequestedBy != "":
			return errNoChange
		}
		i.StopRequestedBy = by
		return nil
	})
	if err != nil {
		return err
	}
	return r.notify(notice{Op: "stop", Parent: parent, ID: id, By: by})
}

func (r *remote) notify(n notice) error {
	o := r.opts()
	msg := nats.NewMsg(o.Subjects.SubagentNotice(n.Parent))
	msg.Data, _ = json.Marshal(n)
	r.seal(msg)
	if err := o.NATS.PublishMsg(msg); err != nil {
		return err
	}
	return o.NATS.Flush()
}

// running counts parent's subagents running on any replica, from the
// registry; on a store error, the last count read.
func (r *remote) running(parent string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	g, err := r.reg.get(ctx, parent)
	r.countMu.Lock()
	defer r.countMu.Unlock()
	if err != nil {
		return r.counts[parent]
	}
	n := g.running()
	r.counts[parent] = n
	return n
}

// --- the parent's owner ---

// ownership records that this replica gained or lost parent's lease
// (from the driver's ownership event, in Publish): either way the parent
// is not ready until its guardrails are restored here again, and its
// charges are no longer consumed here.
func (r *remote) ownership(parent string, _ bool) {
	if stop, _, ok := r.newGeneration(parent, false); ok && stop != nil {
		go stop()
	}
}

// newGeneration starts a new ownership generation of parent, ready or
// not, and returns the previous generation's charge consumer's stop (nil:
// none) and the new generation. ok is false for a parent this replica
// does not know, and for a ready generation once r is closed.
func (r *remote) newGeneration(parent string, ready bool) (stop func(), gen int, ok bool) {
	r.m.mu.Lock()
	known := r.m.parents[parent] != nil
	r.m.mu.Unlock()
	if !known {
		return nil, 0, false
	}
	r.ownMu.Lock()
	defer r.ownMu.Unlock()
	if r.closed && ready {
		return nil, 0, false
	}
	o := r.owned[parent]
	if o == nil {
		o = &ownership{}
		r.owned[parent] = o
	}
	o.gen++
	o.ready = ready
	stop, o.stop = o.stop, nil
	return stop, o.gen, true
}

// restored records that this replica owns parent and restored its
// guardrails (ownerHook.Restore): its charges are consumed and applied
// here from now on, and its admits answered.
func (r *remote) restored(parent string) {
	stop, gen, ok := r.newGeneration(parent, true)
	if !ok {
		return
	}
	if stop != nil {
		stop()
	}
	go r.bindCharges(parent, gen)
}

// ready reports whether charges of parent may be applied here.
func (r *remote) ready(parent string) bool {
	r.ownMu.Lock()
	defer r.ownMu.Unlock()
	o := r.owned[parent]
	return !r.closed && o != nil && o.ready
}

// bindCharges consumes parent's charge records while ownership
// generation gen lasts, retrying until it can.
func (r *remote) bindCharges(parent string, gen int) {
	o := r.opts()
	backoff := retryPause
	for {
		r.ownMu.Lock()
		own, stream := r.owned[parent], r.stream
		current := !r.closed && own != nil && own.gen == gen && own.ready
		r.ownMu.Unlock()
		if !current {
			return
		}
		err := errors.New("the stream is not ready yet")
		var stop func()
		if stream != nil {
			stop, err = r.consumeCharges(stream, parent)
		}
		if err == nil {
			r.ownMu.Lock()
			if r.closed || own.gen != gen {
				r.ownMu.Unlock()
				stop()
				return
			}
			own.stop = stop
			r.ownMu.Unlock()
			o.Log.Info("charging this replica's agent for its subagents", "agent", parent)
			return
		}
		o.Log.Warn("cannot consume an agent's subagent charges yet; retrying", "agent", parent, "error", err, "retry_in", backoff)
		select {
		case <-r.done:
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

// consumeCharges starts consuming parent's charge records.
func (r *remote) consumeCharges(stream jetstream.Stream, parent string) (func(), error) {
	o := r.opts()
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	c, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       chargesPrefix + parent,
		Description:   "agent-worker agent " + parent + ": its subagents' spend, charged by its owner",
		FilterSubject: o.Subjects.SubagentCharges(parent),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       o.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: 256,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, err
	}
	cc, err := c.Consume(func(msg jetstream.Msg) { r.onCharge(parent, msg) },
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			o.Log.Warn("subagent charges consumer error; it retries", "agent", parent, "error", err)
		}))
	if err != nil {
		return nil, err
	}
	return cc.Stop, nil
}

// chargeKey is the store key claimed for a charge record.
func chargeKey(c chargeRecord) string {
	return "subagents." + c.Parent + ".charged." + c.ID + "." + strconv.Itoa(c.Run) + "." + strconv.Itoa(c.Call)
}

// onCharge applies one charge record on the parent's owner: its key is
// claimed (set-if-absent), then the cost charged; a key already claimed
// is a duplicate, acked without charging.
func (r *remote) onCharge(parent string, msg jetstream.Msg) {
	o := r.opts()
	if !r.sealed(msg.Subject(), msg.Headers(), msg.Data()) {
		r.forged("charge record", msg.Subject(), msg.Data())
		_ = msg.Term()
		return
	}
	var c chargeRecord
	if err := json.Unmarshal(msg.Data(), &c); err != nil || c.Parent != parent || !token(c.ID) || c.Run < 1 || c.Call < 1 || !(c.USD >= 0) {
		o.Log.Error("unreadable subagent charge record; terminated", "agent", parent, "error", err, "data", clipRunes(string(msg.Data()), 200))
		_ = msg.Term()
		return
	}
	if !r.ready(parent) {
		_ = msg.NakWithDelay(time.Second) // not (or no longer) the owner here
		return
	}
	data := map[string]any{"id": c.ID, "run": c.Run, "call": c.Call, "cost_usd": c.USD}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	_, err := o.Store.Create(ctx, chargeKey(c), []byte(strconv.FormatFloat(c.USD, 'g', -1, 64)), chargeMemory)
	switch {
	case errors.Is(err, store.ErrExists):
		o.Log.Info("subagent charge already charged; ignored", "agent", parent, "subagent", c.ID, "run", c.Run, "call", c.Call, "cost_usd", c.USD)
		r.m.emit(parent, EventChargeDuplicate, data)
		_ = msg.Ack()
		return
	case err != nil:
		o.Log.Warn("subagent charge not claimed; retrying", "agent", parent, "subagent", c.ID, "error", err)
		_ = msg.NakWithDelay(2 * time.Second)
		return
	}
	if o.Charger != nil {
		o.Charger.Charge(parent, c.USD)
	}
	err = r.reg.update(ctx, parent, func(g *registry) error {
		if i := g.Subs[c.ID]; i != nil {
			i.SpentUSD += c.USD
			return nil
		}
		return errNoChange
	})
	if err != nil {
		o.Log.Warn("subagent spend charged but not shown in the registry", "agent", parent, "subagent", c.ID, "error", err)
	}
	r.m.emit(parent, EventCharged, data)
	_ = msg.Ack()
}

// onAdmit answers a subagent's admit request for a parent ready here;
// other replicas stay silent.
func (r *remote) onAdmit(msg *nats.Msg) {
	o := r.opts()
	parent, ok := o.Subjects.SubagentParent(msg.Subject)
	if !ok || !r.ready(parent) || msg.Reply == "" {
		return
	}
	a := admitReply{OK: true}
	if o.Charger != nil {
		if err := o.Charger.Admit(context.Background(), parent); err != nil {
			a = admitReply{Reason: err.Error()}
		}
	}
	out := nats.NewMsg(msg.Reply)
	out.Data, _ = json.Marshal(a)
	r.seal(out)
	_ = msg.RespondMsg(out)
}

// onNotice stops this replica's subagents that a halt or stop notice
// names.
func (r *remote) onNotice(msg *nats.Msg) {
	if !r.sealed(msg.Subject, msg.Header, msg.Data) {
		r.forged("notice", msg.Subject, msg.Data)
		return
	}
	var n notice
	if err := json.Unmarshal(msg.Data, &n); err != nil {
		return
	}
	switch n.Op {
	case "halt":
		r.m.cancelParent(n.Parent, haltCause(n.Reason))
	case "stop":
		r.m.mu.Lock()
		if f := r.m.parents[n.Parent]; f != nil {
			if s := f.running[n.ID]; s != nil {
				s.cancel(stopCause(n.By))
			}
		}
		r.m.mu.Unlock()
	}
}

// parentHalted queues a halt notice for parent (from the driver's halted
// event, in Publish: it must not block).
func (r *remote) parentHalted(parent, reason string) {
	r.m.mu.Lock()
	known := r.m.parents[parent] != nil
	r.m.mu.Unlock()
	if !known {
		return
	}
	select {
	case r.halts <- notice{Op: "halt", Parent: parent, Reason: reason}:
	default:
		r.opts().Log.Warn("halt notice dropped (too many at once); subagents stop at their next model call", "agent", parent)
	}
}

// publishHalts publishes the queued halt notices until close.
func (r *remote) publishHalts() {
	for {
		select {
		case <-r.done:
			return
		case n := <-r.halts:
			if err := r.notify(n); err != nil {
				r.opts().Log.Warn("halt notice not published; subagents stop at their next model call", "agent", n.Parent, "error", err)
			}
		}
	}
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
