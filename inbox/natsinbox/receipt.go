package natsinbox

import (
	"sync"

	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/store"
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

// settle acks handled messages (after recording their ids) and
// dead-letters dropped ones, until Stop has drained the queue.
func (b *Binding) settle() {
	defer b.worker.Done()
	for {
		b.mu.Lock()
		q := b.queue
		b.queue = nil
		stopped := b.stopped
		b.mu.Unlock()
		for _, o := range q {
			b.settleOne(o)
		}
		if len(q) > 0 {
			continue
		}
		if stopped {
			return
		}
		<-b.wake
	}
}

// settleOne records a handled message's id and then acks it, or
// dead-letters and terminates a dropped one. The message stays known as
// waiting (pending, bySeq) until it is settled, so a redelivery that
// arrives meanwhile — after a reconnect, or because the id write is slow
// — joins it instead of starting a second turn, and is answered with it:
// handled and acked are one ordered step. It also keeps getting
// in-progress acks until then.
func (b *Binding) settleOne(o outcome) {
	r := o.r
	defer func() {
		b.mu.Lock()
		delete(b.pending, r)
		delete(b.bySeq, r.seq)
		b.mu.Unlock()
	}()
	if o.reason != "" {
		msg := r.current()
		reason, detail := RejectDropped, o.reason
		if o.reason == RejectOperatorDropped {
			reason, detail = RejectOperatorDropped, "an operator abandoned the queued message (resume with drop_queued)"
		}
		b.reject(r.agent, r.id, r.subject, msg.Data(), r.headers, &inbox.RejectError{Reason: reason, Detail: detail})
		if err := msg.TermWithReason(reason); err != nil {
			b.opts.Log.Warn("terminate dropped message", "agent", r.agent, "id", r.id, "error", err)
		}
		return
	}
	if b.opts.Store != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := b.opts.Store.Create(ctx, handledKey(r.agent, r.id), turnlog.HandledValue(r.id, o.turn, b.opts.Clock.Now()), b.opts.HandledTTL)
		cancel()
		if err != nil && !errors.Is(err, store.ErrExists) {
			b.opts.Log.Warn("could not record a handled message id; a redelivery would run again", "agent", r.agent, "id", r.id, "error", err)
		}
	}
	if err := r.current().Ack(); err != nil {
		b.opts.Log.Warn("ack failed; the message will be redelivered and recognised as handled", "agent", r.agent, "id", r.id, "error", err)
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
