package natsinbox

import (
	"sync"

	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/turnlog"
)

// receipt is a JetStream message waiting in an agent's inbox.
type receipt struct {
	b       *Binding
	msg     jetstream.Msg
	agent   string
	id      string
	subject string
	headers nats.Header
	seq     seqKey
}

// current returns the newest delivery of the message.
func (r *receipt) current() jetstream.Msg {
	r.b.mu.Lock()
	defer r.b.mu.Unlock()
	return r.msg
}

var _ inbox.Receipt = (*receipt)(nil)

// Handled queues the ack; the driver never waits on NATS.
func (r *receipt) Handled() { r.b.enqueue(outcome{r: r}) }

// HandledBy is Handled, also naming the turn that handled the message: the
// handled id's record (turnlog.Handled) keeps it, so a lookup of the id
// from any replica can say which turn took it. The driver calls it instead
// of Handled.
func (r *receipt) HandledBy(turn uint64) { r.b.enqueue(outcome{r: r, turn: turn}) }

// Dropped queues the dead-letter and termination.
func (r *receipt) Dropped(reason string) { r.b.enqueue(outcome{r: r, reason: reason}) }

func (b *Binding) enqueue(o outcome) {
	b.mu.Lock()
	b.queue = append(b.queue, o)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// settleWorkers bounds how many agents' outcomes are settled at once: each
// agent's are one handled-id write and their acks, in order.
const settleWorkers = 8

// settle acks handled messages (after recording their ids) and
// dead-letters dropped ones, until Stop has drained the queue. What the
// driver settled meanwhile is taken as one batch: each agent's handled
// ids in it are one store write, whatever their number, and up to
// settleWorkers agents are settled at once.
func (b *Binding) settle() {
	defer b.worker.Done()
	for {
		b.mu.Lock()
		q := b.queue
		b.queue = nil
		stopped := b.stopped
		b.mu.Unlock()
		if len(q) > 0 {
			b.settleBatch(q)
			continue
		}
		if stopped {
			return
		}
		<-b.wake
	}
}

// settleBatch settles q: per agent, in the order the driver settled them.
func (b *Binding) settleBatch(q []outcome) {
	byAgent := map[string][]outcome{}
	var order []string
	for _, o := range q {
		if byAgent[o.r.agent] == nil {
			order = append(order, o.r.agent)
		}
		byAgent[o.r.agent] = append(byAgent[o.r.agent], o)
	}
	if len(order) == 1 {
		b.settleAgent(byAgent[order[0]])
		return
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, settleWorkers)
	for _, agent := range order {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			b.settleAgent(byAgent[agent])
		})
	}
	wg.Wait()
}

// settleAgent settles one agent's outcomes: dropped messages are
// dead-lettered and terminated; handled ones are recorded in the agent's
// handled-id record (one write for all of them) and then acked. Every
// message stays known as waiting (pending, bySeq) until it is settled, so
// a redelivery that arrives meanwhile — after a reconnect, or because the
// record write is slow — joins it instead of starting a second turn, and
// is answered with it: handled and acked are one ordered step. It also
// keeps getting in-progress acks until then.
func (b *Binding) settleAgent(os []outcome) {
	defer func() {
		b.mu.Lock()
		for _, o := range os {
			delete(b.pending, o.r)
			delete(b.bySeq, o.r.seq)
		}
		b.mu.Unlock()
	}()
	var handled []outcome
	for _, o := range os {
		if o.reason != "" {
			b.drop(o)
		} else {
			handled = append(handled, o)
		}
	}
	if len(handled) == 0 {
		return
	}
	if b.opts.Store != nil {
		now := b.opts.Clock.Now()
		hs := make([]turnlog.Handled, len(handled))
		for i, o := range handled {
			hs[i] = turnlog.Handled{ID: o.r.id, Turn: o.turn, At: now}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := turnlog.RecordHandled(ctx, b.opts.Store, handled[0].r.agent, hs, b.opts.HandledKeep, b.opts.HandledTTL, now)
		cancel()
		if err != nil {
			b.opts.Log.Warn("could not record handled message ids; a redelivery would run again", "agent", handled[0].r.agent, "messages", len(hs), "error", err)
		}
	}
	for _, o := range handled {
		if err := o.r.current().Ack(); err != nil {
			b.opts.Log.Warn("ack failed; the message will be redelivered and recognised as handled", "agent", o.r.agent, "id", o.r.id, "error", err)
		}
	}
}

// drop dead-letters and terminates a message the driver dropped.
func (b *Binding) drop(o outcome) {
	r := o.r
	msg := r.current()
	reason, detail := RejectDropped, o.reason
	if o.reason == RejectOperatorDropped {
		reason, detail = RejectOperatorDropped, "an operator abandoned the queued message (resume with drop_queued)"
	}
	b.reject(r.agent, r.id, r.subject, msg.Data(), r.headers, &inbox.RejectError{Reason: reason, Detail: detail})
	if err := msg.TermWithReason(reason); err != nil {
		b.opts.Log.Warn("terminate dropped message", "agent", r.agent, "id", r.id, "error", err)
	}
}

// armKeepalive sends in-progress acks for every waiting message every
// AckWait/3, so messages that wait (agent asleep, paused, halted, or in a
// long turn) are not redelivered.
func (b *Binding) armKeepalive() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return
	}
	b.keep = b.opts.Clock.AfterFunc(b.opts.AckWait/3, func() {
		b.mu.Lock()
		waiting := make([]*receipt, 0, len(b.pending))
		for r := range b.pending {
			waiting = append(waiting, r)
		}
		b.mu.Unlock()
		for _, r := range waiting {
			if err := r.current().InProgress(); err != nil && !errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
				b.opts.Log.Warn("in-progress ack failed", "agent", r.agent, "id", r.id, "error", err)
			}
		}
		b.armKeepalive()
	})
}

// Stop stops consuming, settles what the driver has already handled, and
// naks messages still waiting so a restarted worker gets them at once
// instead of after AckWait.
func (b *Binding) Stop() {
	for _, cc := range b.consumes {
		cc.Stop()
	}
	b.mu.Lock()
	b.closing = true // no Bind or retry from now on
	for name, f := range b.failed {
		f.timer.Stop()
		delete(b.failed, name)
	}
	b.mu.Unlock()
	for _, lk := range b.locks {
		waitFor(lk) // the binds under way
	}
	b.mu.Lock()
	bound := b.bound
	b.bound = map[string]func(){}
	b.mu.Unlock()
	for _, stop := range bound {
		stop()
	}
	for _, s := range b.subs {
		_ = s.Unsubscribe()
	}
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return
	}
	b.stopped = true
	if b.keep != nil {
		b.keep.Stop()
	}
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	b.worker.Wait()
	b.mu.Lock()
	waiting := make([]jetstream.Msg, 0, len(b.pending))
	for r := range b.pending {
		waiting = append(waiting, r.msg)
	}
	b.pending = map[*receipt]struct{}{}
	b.bySeq = map[seqKey]*receipt{}
	b.mu.Unlock()
	for _, m := range waiting {
		_ = m.Nak()
	}
	if b.records != nil {
		// Dead-letter records still being written finish, within bounds.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := b.records.Flush(ctx); err != nil {
			b.opts.Log.Warn("dead-letter records not all written before stop", "error", err)
		}
		cancel()
	}
}

// waitFor returns once nobody holds lk (a Bind or a retry under way).
func waitFor(lk *sync.Mutex) {
	lk.Lock()
	defer lk.Unlock()
}
