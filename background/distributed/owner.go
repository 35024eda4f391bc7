package distributed

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/background"
	"github.com/agent-worker/agent-worker/internal/textclip"
	"github.com/agent-worker/agent-worker/store"
)

// ownership is what this replica knows of owning a parent.
type ownership struct {
	// ready: owned here and its guardrails restored since it was
	// acquired, so charges may be applied and admits answered.
	ready bool
	gen   int    // bumped on every change, to discard stale binds
	stop  func() // stops consuming the parent's charges; nil if not
}

// Ownership records that this replica gained or lost parent's lease
// (from the driver's ownership event, in Publish): either way the parent
// is not ready until its guardrails are restored here again, and its
// charges are no longer consumed here.
func (q *queue) Ownership(parent string, _ bool) {
	if stop, _, ok := q.newGeneration(parent, false); ok && stop != nil {
		go stop()
	}
}

// newGeneration starts a new ownership generation of parent, ready or
// not, and returns the previous generation's charge consumer's stop (nil:
// none) and the new generation. ok is false for a parent this replica
// does not know, and for a ready generation once q is closed.
func (q *queue) newGeneration(parent string, ready bool) (stop func(), gen int, ok bool) {
	if !q.knows(parent) {
		return nil, 0, false
	}
	q.ownMu.Lock()
	defer q.ownMu.Unlock()
	if q.closed && ready {
		return nil, 0, false
	}
	o := q.owned[parent]
	if o == nil {
		o = &ownership{}
		q.owned[parent] = o
	}
	o.gen++
	o.ready = ready
	stop, o.stop = o.stop, nil
	return stop, o.gen, true
}

// Restored records that this replica owns parent and restored its
// guardrails (the Manager's Guard's Restore): its charges are consumed
// and applied here from now on, and its admits answered.
func (q *queue) Restored(parent string) {
	stop, gen, ok := q.newGeneration(parent, true)
	if !ok {
		return
	}
	if stop != nil {
		stop()
	}
	go q.bindCharges(parent, gen)
}

// ready reports whether charges of parent may be applied here.
func (q *queue) ready(parent string) bool {
	q.ownMu.Lock()
	defer q.ownMu.Unlock()
	o := q.owned[parent]
	return !q.closed && o != nil && o.ready
}

// bindCharges consumes parent's charge records while ownership
// generation gen lasts, retrying until it can.
func (q *queue) bindCharges(parent string, gen int) {
	backoff := retryPause
	for {
		q.ownMu.Lock()
		own, stream := q.owned[parent], q.stream
		current := !q.closed && own != nil && own.gen == gen && own.ready
		q.ownMu.Unlock()
		if !current {
			return
		}
		err := errors.New("the stream is not ready yet")
		var stop func()
		if stream != nil {
			stop, err = q.consumeCharges(stream, parent)
		}
		if err == nil {
			q.ownMu.Lock()
			if q.closed || own.gen != gen {
				q.ownMu.Unlock()
				stop()
				return
			}
			own.stop = stop
			q.ownMu.Unlock()
			q.log.Info("charging this replica's agent for its subagents", "agent", parent)
			return
		}
		q.log.Warn("cannot consume an agent's subagent charges yet; retrying", "agent", parent, "error", err, "retry_in", backoff)
		select {
		case <-q.done:
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

// consumeCharges starts consuming parent's charge records.
func (q *queue) consumeCharges(stream jetstream.Stream, parent string) (func(), error) {
	o := &q.o
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
	cc, err := c.Consume(func(msg jetstream.Msg) { q.onCharge(parent, msg) },
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			q.log.Warn("subagent charges consumer error; it retries", "agent", parent, "error", err)
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
func (q *queue) onCharge(parent string, msg jetstream.Msg) {
	o := &q.o
	if !q.sealed(msg.Subject(), msg.Headers(), msg.Data()) {
		q.forged("charge record", msg.Subject(), msg.Data())
		_ = msg.Term()
		return
	}
	var c chargeRecord
	if err := json.Unmarshal(msg.Data(), &c); err != nil || c.Parent != parent || !token(c.ID) || c.Run < 1 || c.Call < 1 || !(c.USD >= 0) {
		q.log.Error("unreadable subagent charge record; terminated", "agent", parent, "error", err, "data", textclip.Runes(string(msg.Data()), 200, "…"))
		_ = msg.Term()
		return
	}
	if !q.ready(parent) {
		_ = msg.NakWithDelay(time.Second) // not (or no longer) the owner here
		return
	}
	data := map[string]any{"id": c.ID, "run": c.Run, "call": c.Call, "cost_usd": c.USD}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	_, err := o.Store.Create(ctx, chargeKey(c), []byte(strconv.FormatFloat(c.USD, 'g', -1, 64)), chargeMemory)
	switch {
	case errors.Is(err, store.ErrExists):
		q.log.Info("subagent charge already charged; ignored", "agent", parent, "subagent", c.ID, "run", c.Run, "call", c.Call, "cost_usd", c.USD)
		q.h.Emit(parent, background.EventChargeDuplicate, data)
		_ = msg.Ack()
		return
	case err != nil:
		q.log.Warn("subagent charge not claimed; retrying", "agent", parent, "subagent", c.ID, "error", err)
		_ = msg.NakWithDelay(2 * time.Second)
		return
	}
	if q.charger != nil {
		q.charger.Charge(parent, c.USD)
	}
	err = q.reg.update(ctx, parent, func(g *registry) error {
		if i := g.Subs[c.ID]; i != nil {
			i.SpentUSD += c.USD
			return nil
		}
		return errNoChange
	})
	if err != nil {
		q.log.Warn("subagent spend charged but not shown in the registry", "agent", parent, "subagent", c.ID, "error", err)
	}
	q.h.Emit(parent, background.EventCharged, data)
	_ = msg.Ack()
}

// onAdmit answers a subagent's admit request for a parent ready here;
// other replicas stay silent.
func (q *queue) onAdmit(msg *nats.Msg) {
	o := &q.o
	parent, ok := o.Subjects.SubagentParent(msg.Subject)
	if !ok || !q.ready(parent) || msg.Reply == "" {
		return
	}
	a := admitReply{OK: true}
	if q.charger != nil {
		if err := q.charger.Admit(context.Background(), parent); err != nil {
			a = admitReply{Reason: err.Error()}
		}
	}
	out := nats.NewMsg(msg.Reply)
	out.Data, _ = json.Marshal(a)
	q.seal(out)
	_ = msg.RespondMsg(out)
}
