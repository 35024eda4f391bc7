package distributed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// Admit lets the run make a model call: no stop recorded for it, and its
// parent's owner admits it. It waits while no owner answers. A stop or a
// refusal cancels the run (through the Host) and is returned.
func (r *run) Admit(ctx context.Context) error {
	q := r.q
	o := &q.o
	gctx, cancel := context.WithTimeout(ctx, storeTimeout)
	g, err := q.reg.get(gctx, r.parent)
	cancel()
	if err == nil {
		if i := g.Subs[r.id]; i != nil && i.StopRequestedBy != "" {
			return q.h.Stop(r.parent, r.id, i.StopRequestedBy)
		}
	}
	data, _ := json.Marshal(admitRequest{Parent: r.parent, ID: r.id})
	waited := false
	for {
		rctx, cancel := context.WithTimeout(ctx, admitTimeout)
		reply, err := o.NATS.RequestWithContext(rctx, o.Subjects.SubagentAdmit(r.parent), data)
		cancel()
		if err == nil && !q.sealed(reply.Subject, reply.Header, reply.Data) {
			// Not the owner's answer: someone else answered first.
			q.forged("admission", reply.Subject, reply.Data)
			err = errors.New("an admission without the deployment's seal")
		}
		if err == nil {
			var a admitReply
			if err := json.Unmarshal(reply.Data, &a); err != nil {
				return fmt.Errorf("unreadable admission from the parent's owner: %w", err)
			}
			if !a.OK {
				return q.h.Halt(r.parent, r.id, a.Reason)
			}
			return nil
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if !waited {
			waited = true
			q.log.Warn("subagent waits: its parent's owner does not answer (the agent may be moving between replicas)", "agent", r.parent, "subagent", r.id, "error", err)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(retryPause):
		}
	}
}

// Charge publishes one model call's cost for the parent's owner, and
// waits until JetStream has it (retrying for chargeGiveUp). The publish
// does not depend on the subagent's context: a response received is
// charged even if the subagent is being stopped.
func (r *run) Charge(call int, usd float64) error {
	q := r.q
	o := &q.o
	c := chargeRecord{Parent: r.parent, ID: r.id, Run: r.number, Call: call, USD: usd}
	msg := nats.NewMsg(o.Subjects.SubagentCharges(r.parent))
	msg.Data, _ = json.Marshal(c)
	msg.Header.Set(nats.MsgIdHdr, "charge-"+r.id+"-"+strconv.Itoa(r.number)+"-"+strconv.Itoa(call))
	q.seal(msg)
	giveUp := time.Now().Add(chargeGiveUp)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
		_, err := o.JetStream.PublishMsg(ctx, msg)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(giveUp) {
			q.log.Error("subagent spend not charged to its parent: the charge record could not be published", "agent", r.parent,
				"subagent", r.id, "run", r.number, "call", call, "cost_usd", usd, "error", err)
			return fmt.Errorf("cannot charge its spend to its parent: %w", err)
		}
		select {
		case <-q.h.Drained():
			q.log.Error("subagent spend not charged to its parent: shutting down", "agent", r.parent, "subagent", r.id, "cost_usd", usd, "error", err)
			return fmt.Errorf("cannot charge its spend to its parent: %w", err)
		case <-time.After(retryPause):
		}
	}
}
