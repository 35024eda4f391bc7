package natsinbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/natsbus"
	"github.com/agent-worker/agent-worker/natsbus/subject"
	"github.com/agent-worker/agent-worker/seal"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/turnlog"
)

// Header names on dead-lettered messages.
const (
	HeaderRejectReason    = "Agent-Worker-Reject-Reason"
	HeaderRejectDetail    = "Agent-Worker-Reject-Detail"
	HeaderOriginalSubject = "Agent-Worker-Original-Subject"
	HeaderAgent           = "Agent-Worker-Agent"
)

// HeaderVia on an inbound message names the worker receiver it came
// through: "alertmanager" (inbox.ViaAlertmanager) when the worker's API
// publishes an Alertmanager notification, ViaSubagent on a subagent's
// report. The binding copies it into inbox.Message.Via only when the
// message carries the deployment's seal over it (package seal; SealVia):
// a NATS publisher can set any header, and a report's id reaches the
// parent's wake line. A claim without a valid seal is ignored — the
// message is delivered as any other, from "nats:<subject>" — and logged,
// and the message-unsealed event counts it.
const HeaderVia = "Agent-Worker-Via"

// ViaSubagent as the HeaderVia value marks a background subagent's report
// (package background publishes it to the parent's inbox subject): the
// binding copies it into inbox.Message.Via (driver.ViaSubagent, the same
// value) and the message's source reads "subagent:<id>", so the parent
// wakes with source subagent, as for a report made in its own process.
const ViaSubagent = "subagent"

// sealedHeaders are the headers a seal covers, besides subject and body:
// the claim and the id the claim puts in the prompt.
var sealedHeaders = []string{HeaderVia, nats.MsgIdHdr}

// SealVia seals m, a message the worker publishes with HeaderVia set (its
// Nats-Msg-Id and data set first), so that the binding grants its claim.
func SealVia(k seal.Key, m *nats.Msg) { k.SealMsg(m, sealedHeaders...) }

// via returns the inbox.Message.Via of a message on subject with headers
// h and body data: the HeaderVia claim when it is one the binding knows and
// sealed by this deployment, else "". An unsealed claim is logged and
// emitted (message-unsealed) for agent.
func (b *Binding) via(agent, subject string, h nats.Header, data []byte) string {
	v := h.Get(HeaderVia)
	if v != inbox.ViaAlertmanager && v != ViaSubagent {
		return ""
	}
	if b.opts.Seal.CheckMsg(subject, h, data, sealedHeaders...) {
		return v
	}
	b.opts.Log.Warn("message claims to come from the worker without its seal; delivered as an ordinary message", "agent", agent,
		"subject", subject, "header", HeaderVia+": "+v, "id", h.Get(nats.MsgIdHdr))
	b.emit(agent, events.MessageUnsealed, map[string]any{"subject": subject, "via": v, "id": h.Get(nats.MsgIdHdr)})
	return ""
}

// source is inbox.Message.Source of a message on subject with id, its Via
// granted: "nats:<subject>", or "subagent:<id>" for a subagent's report.
func source(subject, via, id string) string {
	if via == ViaSubagent && id != "" {
		return "subagent:" + id
	}
	return "nats:" + subject
}

// RejectUnknownAgent is the reject reason for input addressed to an agent
// that is not configured.
const RejectUnknownAgent = "unknown_agent"

// RejectDropped is the reject reason for a message the inbox dropped
// (overflow, or too many failed turns).
const RejectDropped = "dropped"

// RejectOperatorDropped is the reject reason for a queued message an
// operator abandoned (resume with drop_queued): the receipt is told
// Dropped with this reason (driver.ReasonOperatorDropped, the same
// value), and the message is dead-lettered with it and terminated.
const RejectOperatorDropped = "operator_dropped"

// Target receives an agent's messages; the driver's agent is one.
type Target interface {
	Send(inbox.Message)
}

// Agent is one agent as the binding needs it.
type Agent struct {
	Name   string
	Target Target
	// Subscribe lists the extra subjects the agent binds.
	Subscribe []config.Subscription
	// Cap bounds the agent's unacked messages (its inbox cap).
	Cap int
}

// Options configure a Binding.
type Options struct {
	Subjects natsbus.Subjects
	// Stream is the JetStream stream holding the agents' input.
	Stream string
	// MaxBytes bounds a body (nats.max_message_bytes).
	MaxBytes int
	// AckWait is the consumers' ack deadline; in-progress acks are sent
	// every AckWait/3.
	AckWait time.Duration
	// Store records handled message ids (JetStream mode): one record per
	// agent (turnlog.HandledSetKey).
	Store store.Store
	// HandledTTL is how long a handled id, and the record of a
	// dead-lettered one, is remembered. Default 24h.
	HandledTTL time.Duration
	// HandledKeep bounds how many handled ids an agent's record keeps:
	// the newest, within HandledTTL. Default turnlog.DefaultHandledKeep.
	HandledKeep int
	Events      *events.Bus
	Log         *slog.Logger
	Clock       clock.Clock
	// Leased: consume an agent only after Bind (when this replica holds
	// its lease); otherwise every agent is bound at Start.
	Leased bool
	// BindRetry is the first wait before a failed Bind is tried again
	// (default 1s); each further failure doubles it, up to BindRetryMax
	// (default 30s), with up to 20% jitter.
	BindRetry, BindRetryMax time.Duration
	// OnBindFailure, when set, is told of every failed Bind (the first and
	// each retry), for a metric.
	OnBindFailure func(agent string, err error)
	// Seal is the deployment's key: only a message sealed with it has its
	// HeaderVia claim granted. The zero Key grants none.
	Seal seal.Key
}

// Binding consumes the agents' NATS input. Stop it to release the
// consumers.
type Binding struct {
	opts    Options
	nc      *nats.Conn
	agents  map[string]*Agent
	records *turnlog.Log // dead-letter records; nil without a store

	consumes []jetstream.ConsumeContext // the unknown-agents consumer
	subs     []*nats.Subscription       // core mode: unknown-agent subscriptions
	stream   jetstream.Stream           // nil in core NATS mode
	js       jetstream.JetStream        // nil in core NATS mode: dead letters are published, not kept
	// bound holds how to stop consuming each agent this replica consumes.
	bound map[string]func()
	// locks serialises Bind, its retries and Unbind of one agent.
	locks map[string]*sync.Mutex
	// failed holds, under mu, the agents whose Bind failed and is being
	// retried: they are not consumed although this replica owns them.
	failed map[string]*bindFailure
	// gen counts each agent's Binds and Unbinds (under mu): a delivery of
	// an earlier generation, still in its callback when Unbind began, is
	// released instead of reaching the agent.
	gen map[string]uint64

	mu      sync.Mutex
	pending map[*receipt]struct{}
	// bySeq finds a waiting message by agent and stream sequence, so a
	// redelivery of a message still in the inbox refreshes its handle
	// instead of queueing it twice.
	bySeq   map[seqKey]*receipt
	queue   []outcome // receipts settled by the driver, to be acked or termed
	wake    chan struct{}
	stopped bool
	closing bool // Stop began: no more binds
	keep    clock.Timer
	worker  sync.WaitGroup
}

// bindFailure is an agent whose consumers could not be bound, retried
// with backoff until Bind succeeds or Unbind gives the agent up.
type bindFailure struct {
	err      error
	since    time.Time
	attempts int
	timer    clock.Timer
}

// NotConsuming is an agent this replica owns but does not consume: its
// consumers could not be bound (Err), since Since, Attempts times; the
// binding retries with backoff.
type NotConsuming struct {
	Agent    string
	Err      string
	Since    time.Time
	Attempts int
}

type seqKey struct {
	agent string
	seq   uint64
}

type outcome struct {
	r      *receipt
	reason string // "" handled; else the drop reason
	turn   uint64 // the turn that handled it (0: not told)
}

// Start creates (or resumes) one durable pull consumer per agent, plus
// one that dead-letters input for unknown agents, and starts consuming.
// With js nil it runs in core NATS mode. Durable consumers of agents no
// longer configured are deleted so they do not hold messages forever.
func Start(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, agents []Agent, opts Options) (*Binding, error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	if opts.HandledTTL == 0 {
		opts.HandledTTL = 24 * time.Hour
	}
	if opts.AckWait == 0 {
		opts.AckWait = 30 * time.Second
	}
	if opts.BindRetry <= 0 {
		opts.BindRetry = time.Second
	}
	if opts.BindRetryMax < opts.BindRetry {
		opts.BindRetryMax = max(30*time.Second, opts.BindRetry)
	}
	b := &Binding{opts: opts, nc: nc, agents: map[string]*Agent{}, pending: map[*receipt]struct{}{}, bySeq: map[seqKey]*receipt{}, bound: map[string]func(){},
		gen: map[string]uint64{}, wake: make(chan struct{}, 1), locks: map[string]*sync.Mutex{}, failed: map[string]*bindFailure{}}
	for i := range agents {
		b.agents[agents[i].Name] = &agents[i]
		b.locks[agents[i].Name] = &sync.Mutex{}
	}
	if opts.Store != nil {
		b.records = turnlog.New(opts.Store, opts.Log)
	}
	b.worker.Add(1)
	go b.settle()
	var err error
	b.js = js
	if js == nil {
		err = b.startCore()
	} else {
		err = b.startJetStream(ctx, js)
	}
	if err != nil {
		b.Stop()
		return nil, err
	}
	return b, nil
}

// Durable consumer names: an agent's wake input and its deferred input
// each have their own, so a deferred backlog holds no slot a wake message
// needs. The prefixes differ from the first letter, so a name tells its
// agent and its kind.
const (
	wakePrefix     = "agent-"
	deferredPrefix = "deferred-"
)

// consumerName is an agent's durable consumer of wake input.
func consumerName(agent string) string { return wakePrefix + agent }

// deferredConsumerName is an agent's durable consumer of deferred input.
func deferredConsumerName(agent string) string { return deferredPrefix + agent }

const unknownConsumer = "unknown-agents"

func (b *Binding) startJetStream(ctx context.Context, js jetstream.JetStream) error {
	stream, err := js.Stream(ctx, b.opts.Stream)
	if err != nil {
		return fmt.Errorf("stream %s: %w", b.opts.Stream, err)
	}
	if err := b.pruneConsumers(ctx, stream); err != nil {
		return err
	}
	b.stream = stream
	if !b.opts.Leased {
		for _, name := range slices.Sorted(maps.Keys(b.agents)) {
			if err := b.Bind(ctx, name); err != nil {
				return err
			}
		}
	}
	c, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:        unknownConsumer,
		Description:    "agent-worker: dead-letters input for agents that are not configured",
		FilterSubjects: []string{b.opts.Subjects.AllInboxes(), b.opts.Subjects.AllDeferred()},
		AckPolicy:      jetstream.AckNonePolicy,
		DeliverPolicy:  jetstream.DeliverNewPolicy,
	})
	if err != nil {
		return fmt.Errorf("consumer for unknown agents: %w", err)
	}
	cc, err := c.Consume(func(m jetstream.Msg) { b.onUnknown(m.Subject(), m.Data(), m.Headers()) })
	if err != nil {
		return fmt.Errorf("consume for unknown agents: %w", err)
	}
	b.consumes = append(b.consumes, cc)
	b.armKeepalive()
	return nil
}

// Bind starts consuming the agent's input (when this replica gains its
// lease; at Start for every agent when not leased). Binding a bound agent
// is a no-op. A failure (the stream's consumer limit reached, NATS
// unreachable, ...) is logged, told to Options.OnBindFailure, reported by
// NotConsuming until a retry succeeds, and retried with backoff until
// then or until Unbind; the error is returned as well.
func (b *Binding) Bind(ctx context.Context, name string) error {
	if b.agents[name] == nil {
		return fmt.Errorf("bind: unknown agent %q", name)
	}
	return b.bindAgent(ctx, name, nil)
}

// bindAgent binds the agent under its lock. retry is the failure a
// retry answers: when it is no longer the agent's (Unbind gave it up, or
// another Bind settled it), nothing is done.
func (b *Binding) bindAgent(ctx context.Context, name string, retry *bindFailure) error {
	lk := b.locks[name]
	lk.Lock()
	defer lk.Unlock()
	b.mu.Lock()
	current, stopped := b.failed[name], b.stopped || b.closing
	b.mu.Unlock()
	if stopped || (retry != nil && current != retry) {
		return nil
	}
	if err := b.bind(ctx, name); err != nil {
		b.bindFailed(name, err)
		return err
	}
	if current != nil {
		b.mu.Lock()
		delete(b.failed, name)
		current.timer.Stop()
		b.mu.Unlock()
		b.opts.Log.Info("consuming for the agent again after failed binds", "agent", name, "attempts", current.attempts,
			"not_consuming_for", b.opts.Clock.Now().Sub(current.since).Round(time.Millisecond))
	}
	return nil
}

// bindFailed records a failed bind of the agent and arms its retry.
func (b *Binding) bindFailed(name string, err error) {
	b.mu.Lock()
	if b.stopped || b.closing {
		b.mu.Unlock()
		return
	}
	f := b.failed[name]
	if f == nil {
		f = &bindFailure{since: b.opts.Clock.Now()}
		b.failed[name] = f
	} else {
		f.timer.Stop()
	}
	f.err = err
	f.attempts++
	wait := b.opts.BindRetry << min(f.attempts-1, 16)
	wait = min(wait, b.opts.BindRetryMax)
	wait += time.Duration(rand.Int64N(int64(wait/5) + 1))
	f.timer = b.opts.Clock.AfterFunc(wait, func() { b.retryBind(name, f) })
	attempts := f.attempts
	b.mu.Unlock()
	b.opts.Log.Error("cannot consume for an agent this replica owns: its messages are not handled until a retry succeeds", "agent", name,
		"attempt", attempts, "retry_in", wait.Round(time.Millisecond), "error", err)
	if b.opts.OnBindFailure != nil {
		b.opts.OnBindFailure(name, err)
	}
}

// retryBind is a failed bind's retry.
func (b *Binding) retryBind(name string, f *bindFailure) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = b.bindAgent(ctx, name, f) // a failure arms the next retry
}

// NotConsuming lists, by name, the agents whose Bind failed and is being
// retried: this replica owns them, but their messages wait in the stream.
func (b *Binding) NotConsuming() []NotConsuming {
	b.mu.Lock()
	out := make([]NotConsuming, 0, len(b.failed))
	for name, f := range b.failed {
		out = append(out, NotConsuming{Agent: name, Err: f.err.Error(), Since: f.since, Attempts: f.attempts})
	}
	b.mu.Unlock()
	slices.SortFunc(out, func(x, y NotConsuming) int { return strings.Compare(x.Agent, y.Agent) })
	return out
}

// BindError says why the agent is not consumed although this replica
// owns it ("" when it is consumed, or not owned here).
func (b *Binding) BindError(name string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if f := b.failed[name]; f != nil {
		return f.err.Error()
	}
	return ""
}

// bind creates the agent's consumers and starts consuming them.
func (b *Binding) bind(ctx context.Context, name string) error {
	a := b.agents[name]
	b.mu.Lock()
	_, bound := b.bound[name]
	b.mu.Unlock()
	if bound {
		return nil
	}
	if b.stream == nil { // core NATS mode
		subs, err := b.subscribeCore(a)
		if err != nil {
			return err
		}
		b.mu.Lock()
		b.bound[name] = func() {
			for _, s := range subs {
				_ = s.Unsubscribe()
			}
		}
		b.mu.Unlock()
		return nil
	}
	// Wake input and deferred input have a consumer each, both bounded by
	// the inbox cap: deferred messages beyond what the agent holds stay in
	// the stream, and however many there are, a wake message still has a
	// slot to arrive in.
	wake, deferred := []string{b.opts.Subjects.Inbox(name)}, []string{b.opts.Subjects.Deferred(name)}
	for _, s := range a.Subscribe {
		if s.Mode == "deferred" {
			deferred = append(deferred, s.Subject)
		} else {
			wake = append(wake, s.Subject)
		}
	}
	b.mu.Lock()
	b.gen[name]++
	gen := b.gen[name]
	b.mu.Unlock()
	var stops []func()
	stopAll := func() {
		for _, stop := range stops {
			stop()
		}
	}
	for _, c := range []struct {
		durable, what string
		filters       []string
	}{{consumerName(name), "wake input", wake}, {deferredConsumerName(name), "deferred input", deferred}} {
		stop, err := b.consume(ctx, a, gen, c.durable, c.what, c.filters)
		if err != nil {
			stopAll()
			return err
		}
		stops = append(stops, stop)
	}
	b.mu.Lock()
	b.bound[name] = stopAll
	b.mu.Unlock()
	return nil
}

// consume creates (or resumes) one durable consumer of the agent's input
// and starts consuming it; it returns how to stop.
func (b *Binding) consume(ctx context.Context, a *Agent, gen uint64, durable, what string, filters []string) (func(), error) {
	c, err := b.stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:        durable,
		Description:    "agent-worker agent " + a.Name + ": " + what,
		FilterSubjects: filters,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        b.opts.AckWait,
		MaxAckPending:  max(a.Cap, 1),
		MaxDeliver:     -1,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("consumer %s for agent %s on %v: %w", durable, a.Name, filters, err)
	}
	cc, err := c.Consume(func(m jetstream.Msg) { b.onMessage(a, gen, m) },
		jetstream.PullMaxMessages(max(a.Cap, 1)),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			b.opts.Log.Warn("consumer error; it retries", "agent", a.Name, "consumer", durable, "error", err)
		}))
	if err != nil {
		return nil, fmt.Errorf("consume %s for agent %s: %w", durable, a.Name, err)
	}
	return func() { b.stopConsuming(cc, a.Name, durable) }, nil
}

// drainWait bounds how long stopping a consumer waits for the messages
// already on their way to this client.
const drainWait = 2 * time.Second

// stopConsuming stops cc without losing a message it fetched: Drain hands
// the callback every message already delivered to this client (Stop would
// discard them, and the server would redeliver them only after AckWait),
// and once Closed no callback runs any more, so Unbind and Stop release
// every waiting message — another replica gets them at once. Without a
// connection nothing is on its way, and there is no waiting.
func (b *Binding) stopConsuming(cc jetstream.ConsumeContext, agent, durable string) {
	if !b.nc.IsConnected() {
		cc.Stop()
		return
	}
	cc.Drain()
	t := time.NewTimer(drainWait)
	defer t.Stop()
	select {
	case <-cc.Closed():
	case <-t.C:
		b.opts.Log.Warn("consumer did not drain in time; messages still on their way are redelivered after the ack wait", "agent", agent, "consumer", durable, "waited", drainWait)
	}
}

// Unbind stops consuming the agent's input and releases its waiting
// messages (nak) for whichever replica owns the agent next; a failed
// Bind is no longer retried.
func (b *Binding) Unbind(name string) {
	if lk := b.locks[name]; lk != nil {
		lk.Lock()
		defer lk.Unlock()
	}
	b.mu.Lock()
	if f := b.failed[name]; f != nil {
		f.timer.Stop()
		delete(b.failed, name)
	}
	stop := b.bound[name]
	delete(b.bound, name)
	b.gen[name]++
	b.mu.Unlock()
	if stop == nil {
		return
	}
	stop()
	b.mu.Lock()
	var release []jetstream.Msg
	for r := range b.pending {
		if r.agent == name {
			release = append(release, r.msg)
			delete(b.pending, r)
			delete(b.bySeq, r.seq)
		}
	}
	b.mu.Unlock()
	for _, m := range release {
		_ = m.Nak()
	}
	b.opts.Log.Info("stopped consuming for an agent this replica no longer owns", "agent", name, "released", len(release))
}

// pruneConsumers deletes agent consumers whose agent is gone.
func (b *Binding) pruneConsumers(ctx context.Context, stream jetstream.Stream) error {
	names := stream.ConsumerNames(ctx)
	var stale []string
	for n := range names.Name() {
		agent, ok := strings.CutPrefix(n, wakePrefix)
		if !ok {
			agent, ok = strings.CutPrefix(n, deferredPrefix)
		}
		if ok && b.agents[agent] == nil {
			stale = append(stale, n)
		}
	}
	if err := names.Err(); err != nil {
		return fmt.Errorf("list consumers of %s: %w", b.opts.Stream, err)
	}
	for _, n := range stale {
		if err := stream.DeleteConsumer(ctx, n); err != nil {
			return fmt.Errorf("delete consumer %s of a removed agent: %w", n, err)
		}
		b.opts.Log.Warn("deleted the consumer of an agent no longer configured; its unhandled messages are released", "consumer", n)
	}
	return nil
}

func (b *Binding) startCore() error {
	if !b.opts.Leased {
		for _, name := range slices.Sorted(maps.Keys(b.agents)) {
			if err := b.Bind(context.Background(), name); err != nil {
				return err
			}
		}
	}
	for _, subj := range []string{b.opts.Subjects.AllInboxes(), b.opts.Subjects.AllDeferred()} {
		sub, err := b.nc.Subscribe(subj, func(m *nats.Msg) { b.onUnknown(m.Subject, m.Data, m.Header) })
		if err != nil {
			return fmt.Errorf("subscribe %s: %w", subj, err)
		}
		b.subs = append(b.subs, sub)
	}
	// Once Start returns, the server knows every subscription.
	return b.nc.Flush()
}

// subscribeCore subscribes to one agent's subjects in core NATS mode.
func (b *Binding) subscribeCore(a *Agent) ([]*nats.Subscription, error) {
	subjects := []string{b.opts.Subjects.Inbox(a.Name), b.opts.Subjects.Deferred(a.Name)}
	for _, s := range a.Subscribe {
		subjects = append(subjects, s.Subject)
	}
	var subs []*nats.Subscription
	for _, subj := range slices.Compact(subjects) {
		sub, err := b.nc.Subscribe(subj, func(m *nats.Msg) { b.onCore(a, m) })
		if err != nil {
			return subs, fmt.Errorf("subscribe %s for agent %s: %w", subj, a.Name, err)
		}
		subs = append(subs, sub)
	}
	return subs, b.nc.Flush()
}

// kind says whether a message on subject wakes agent a.
func (b *Binding) kind(a *Agent, subj string) inbox.Kind {
	if agent, k, ok := b.opts.Subjects.Agent(subj); ok && agent == a.Name {
		if k == "deferred" {
			return inbox.Deferred
		}
		return inbox.Wake
	}
	kind := inbox.Kind("")
	for _, s := range a.Subscribe {
		if subject.Match(s.Subject, subj) {
			if s.Mode != "deferred" {
				return inbox.Wake
			}
			kind = inbox.Deferred
		}
	}
	if kind == "" {
		return inbox.Wake
	}
	return kind
}

// onMessage handles one JetStream delivery for agent a, from the
// consumer of binding generation gen. It never blocks on the agent: Send
// only queues.
func (b *Binding) onMessage(a *Agent, gen uint64, m jetstream.Msg) {
	meta, err := m.Metadata()
	if err != nil {
		b.opts.Log.Warn("message without JetStream metadata; terminated", "agent", a.Name, "subject", m.Subject(), "error", err)
		_ = m.Term()
		return
	}
	body, err := inbox.ParseBody(m.Data(), b.opts.MaxBytes)
	if err != nil {
		b.reject(a.Name, rejectedID(a.Name, m.Headers(), m.Data(), meta), m.Subject(), m.Data(), m.Headers(), err)
		if err := m.TermWithReason(rejectReason(err)); err != nil {
			b.opts.Log.Warn("terminate rejected message", "agent", a.Name, "error", err)
		}
		return
	}
	id, explicit := messageID(a.Name, m.Headers(), body, meta)
	sk := seqKey{a.Name, meta.Sequence.Stream}
	b.mu.Lock()
	if waiting, ok := b.bySeq[sk]; ok {
		// Delivered again while it still waits in the inbox or is being
		// settled (e.g. after a server restart): answer through the
		// newest delivery, queue nothing. Checked before the handled ids,
		// which a settling message may not have reached yet.
		waiting.msg = m
		b.mu.Unlock()
		b.opts.Log.Debug("redelivery of a waiting message; not queued again", "agent", a.Name, "id", id, "deliveries", meta.NumDelivered)
		return
	}
	b.mu.Unlock()
	if (explicit || meta.NumDelivered > 1) && b.opts.Store != nil {
		_, handled, err := turnlog.LookupHandled(context.Background(), b.opts.Store, a.Name, id, b.opts.Clock.Now())
		switch {
		case err == nil && handled:
			b.opts.Log.Info("duplicate of a handled message; acked without a turn", "agent", a.Name, "id", id, "deliveries", meta.NumDelivered)
			b.emit(a.Name, events.MessageDuplicate, map[string]any{"id": id, "subject": m.Subject(), "deliveries": meta.NumDelivered})
			if err := m.Ack(); err != nil {
				b.opts.Log.Warn("ack duplicate", "agent", a.Name, "id", id, "error", err)
			}
			return
		case err != nil:
			b.opts.Log.Warn("cannot check whether a message was handled; delivering it (at least once)", "agent", a.Name, "id", id, "error", err)
		}
	}
	r := &receipt{b: b, msg: m, agent: a.Name, id: id, subject: m.Subject(), headers: m.Headers(), seq: sk}
	b.mu.Lock()
	if b.stopped || b.gen[a.Name] != gen {
		// Stopped, or Unbind began while this delivery was in flight (a
		// slow handled-id check): the agent is not consumed here any
		// more, so nobody would settle it. Released for the next owner.
		b.mu.Unlock()
		b.opts.Log.Info("delivery for an agent no longer consumed here; released", "agent", a.Name, "id", id)
		_ = m.Nak()
		return
	}
	if waiting, ok := b.bySeq[sk]; ok {
		// It arrived twice while its handled id was being looked up.
		waiting.msg = m
		b.mu.Unlock()
		return
	}
	b.pending[r] = struct{}{}
	b.bySeq[sk] = r
	b.mu.Unlock()
	via := b.via(a.Name, m.Subject(), m.Headers(), m.Data())
	a.Target.Send(inbox.Message{
		ID: id, Kind: b.kind(a, m.Subject()), Source: source(m.Subject(), via, id), Via: via, From: body.From,
		Text: body.Text, Attributes: body.Attributes, Received: meta.Timestamp, Receipt: r,
		Redelivered: meta.NumDelivered > 1,
	})
}

// onCore handles one core NATS message (at most once: no receipt).
func (b *Binding) onCore(a *Agent, m *nats.Msg) {
	body, err := inbox.ParseBody(m.Data, b.opts.MaxBytes)
	if err != nil {
		b.reject(a.Name, m.Header.Get(nats.MsgIdHdr), m.Subject, m.Data, m.Header, err)
		return
	}
	id := natsbus.PlainMsgID(a.Name, m.Header.Get(nats.MsgIdHdr), body.ID)
	if id == "" {
		id = body.ID
	}
	via := b.via(a.Name, m.Subject, m.Header, m.Data)
	a.Target.Send(inbox.Message{
		ID: id, Kind: b.kind(a, m.Subject), Source: source(m.Subject, via, id), Via: via, From: body.From,
		Text: body.Text, Attributes: body.Attributes, Received: b.opts.Clock.Now(),
	})
}

// onUnknown dead-letters input addressed to an agent that is not
// configured; input for known agents is theirs and ignored here.
func (b *Binding) onUnknown(subject string, data []byte, h nats.Header) {
	agent, _, ok := b.opts.Subjects.Agent(subject)
	if ok && b.agents[agent] != nil {
		return
	}
	b.reject(natsbus.UnknownAgent, h.Get(nats.MsgIdHdr), subject, data, h, &inbox.RejectError{Reason: RejectUnknownAgent, Detail: fmt.Sprintf("no agent %q is configured", agent)})
}

func rejectReason(err error) string {
	var re *inbox.RejectError
	if errors.As(err, &re) {
		return re.Reason
	}
	return "invalid"
}

// reject publishes the original body to the agent's dead-letter subject
// with the reason, logs it and emits message-rejected. id is the message's
// id when known ("" otherwise), for the log and the event; for a
// configured agent, a message with an id is also recorded in the store
// (turnlog.DeadLetter, kept HandledTTL), so GET
// /v1/agents/{name}/messages/{id} can say why.
func (b *Binding) reject(agent, id, subject string, data []byte, h nats.Header, why error) {
	reason := rejectReason(why)
	dlq := b.opts.Subjects.DLQ(agent)
	out := nats.NewMsg(dlq)
	for k, vs := range h {
		if !strings.HasPrefix(k, "Nats-") {
			out.Header[k] = vs
		}
	}
	out.Header.Set(HeaderRejectReason, reason)
	out.Header.Set(HeaderRejectDetail, clip(why.Error(), 500))
	out.Header.Set(HeaderOriginalSubject, subject)
	out.Header.Set(HeaderAgent, agent)
	if id != "" {
		out.Header.Set(HeaderMessageID, id)
	}
	out.Data = data
	published := dlq
	var err error
	if b.js != nil {
		// Kept in the dead-letter stream: a publish it confirmed.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = b.js.PublishMsg(ctx, out)
		cancel()
		if errors.Is(err, jetstream.ErrNoStreamResponse) {
			// No stream keeps dead letters here (a binding started without
			// the worker's dead-letter stream): published, not kept.
			b.opts.Log.Warn("no stream keeps dead letters on this subject; published without being kept", "subject", dlq)
			err = b.nc.PublishMsg(out)
		}
	} else {
		err = b.nc.PublishMsg(out)
	}
	if err != nil {
		published = ""
		b.opts.Log.Error("dead-letter publish failed; the rejected message is lost", "agent", agent, "subject", subject, "reason", reason, "error", err)
	}
	if b.records != nil && b.agents[agent] != nil {
		detail := why.Error()
		if re, ok := errors.AsType[*inbox.RejectError](why); ok {
			detail = re.Detail
		}
		b.records.DeadLetter(agent, turnlog.DeadLetter{ID: id, Reason: reason, Detail: detail, Subject: subject, DLQ: published, At: b.opts.Clock.Now()}, b.opts.HandledTTL)
	}
	b.opts.Log.Warn("message rejected to the dead-letter subject", "agent", agent, "id", id, "subject", subject, "reason", reason, "detail", clip(why.Error(), 200), "dlq", dlq)
	b.emit(agent, events.MessageRejected, map[string]any{"id": id, "reason": reason, "subject": subject, "dlq": dlq})
}

func (b *Binding) emit(agent, typ string, data map[string]any) {
	if b.opts.Events != nil {
		b.opts.Events.Publish(events.Event{Time: b.opts.Clock.Now(), Agent: agent, Type: typ, Data: data})
	}
}

// rejectedID is the id agent knows a message whose body was refused by,
// as far as it can be told: messageID's, with the "id" of a JSON object
// body that has one as the envelope's id.
func rejectedID(agent string, h nats.Header, data []byte, meta *jetstream.MsgMetadata) string {
	var env struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(data, &env) != nil {
		env.ID = ""
	}
	id, _ := messageID(agent, h, inbox.Body{ID: strings.TrimSpace(env.ID)}, meta)
	return id
}

// messageID returns the idempotency key agent knows the message by and
// whether the sender chose it: its Nats-Msg-Id (the envelope's id when
// the Nats-Msg-Id is natsbus.MsgID of it: ids are per agent), else the
// envelope's id, else its stream sequence.
func messageID(agent string, h nats.Header, body inbox.Body, meta *jetstream.MsgMetadata) (string, bool) {
	if id := natsbus.PlainMsgID(agent, h.Get(nats.MsgIdHdr), body.ID); id != "" {
		return id, true
	}
	if body.ID != "" {
		return body.ID, true
	}
	return meta.Stream + "-seq-" + strconv.FormatUint(meta.Sequence.Stream, 10), false
}

// HandledID reports whether a message with id was handled by a turn of
// agent (its handled-id record holds it: among the newest HandledKeep,
// within HandledTTL): the check a delivery of that id
// meets in JetStream mode, where it is acked as a duplicate without a
// turn. A publisher asks it before publishing, so it can answer
// "duplicate" instead of queueing a message that will be dropped. The
// error is the store's (never store.ErrNotFound).
func HandledID(ctx context.Context, st store.Store, agent, id string) (bool, error) {
	_, handled, err := turnlog.LookupHandled(ctx, st, agent, id, time.Now())
	return handled, err
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
