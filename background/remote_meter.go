package background

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

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
