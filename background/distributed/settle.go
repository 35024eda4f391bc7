package distributed

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/background"
	"github.com/agent-worker/agent-worker/internal/textclip"
)

// Finish reports the ended run to its parent over NATS, records it and
// acks the job; a run stopped by this replica's shutdown (or whose report
// cannot be published before the drain ends) is handed back instead.
func (r *run) Finish(e background.End) {
	q := r.q
	if e.Shutdown {
		r.requeue()
		return
	}
	if !q.publishReport(r.parent, r.id, e.Report, e.Trace, q.h.Drained()) {
		r.requeue()
		return
	}
	now := q.clock.Now()
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	q.setState(ctx, r.job(), func(i *background.Info) {
		i.State, i.Finished = e.Outcome, &now
	})
	q.log.Info("subagent finished", "agent", r.parent, "subagent", r.id, "outcome", e.Outcome, "run", r.number, "cost_usd", e.Spent, "error", e.Err)
	q.h.Emit(r.parent, background.EventFinished, map[string]any{"id": r.id, "outcome": e.Outcome, "cost_usd": e.Spent, "run": r.number, "replica": q.replica})
	if err := r.delivery().DoubleAck(ctx); err != nil {
		// Delivered again later, the job is seen finished and acked.
		q.log.Warn("subagent job not acked; a redelivery will be acked as finished", "agent", r.parent, "subagent", r.id, "error", err)
	}
}

// requeue hands a job this replica will not finish back to the stream,
// to be run again at once by a replica with room.
func (r *run) requeue() {
	q := r.q
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	q.setState(ctx, r.job(), func(i *background.Info) {
		if i.Live() {
			i.State = background.StateQueued
		}
	})
	if err := r.delivery().Nak(); err != nil {
		q.log.Warn("subagent job not handed back; it is delivered again after the ack wait", "agent", r.parent, "subagent", r.id, "error", err)
	}
	q.log.Info("subagent handed back unfinished: another replica runs it again", "agent", r.parent, "subagent", r.id, "run", r.number)
	q.h.Emit(r.parent, background.EventRequeued, map[string]any{"id": r.id, "run": r.number})
}

// giveUp reports a job that will not run (again) to its parent, records
// it and acks it. If the report cannot be published before this replica
// stops taking jobs, the job is handed back.
func (q *queue) giveUp(j job, msg jetstream.Msg, n int, outcome, why string) {
	if !q.publishReport(j.Parent, j.ID, q.h.ReportText(j.ID, j.Task, outcome, why, ""), "", q.take.Done()) {
		_ = msg.Nak()
		return
	}
	now := q.clock.Now()
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	q.setState(ctx, j, func(i *background.Info) {
		i.State, i.Finished = outcome, &now
		if outcome == background.OutcomeFailed {
			i.Runs = n - 1
		}
	})
	q.log.Warn("subagent not run", "agent", j.Parent, "subagent", j.ID, "outcome", outcome, "reason", why)
	q.h.Emit(j.Parent, background.EventFinished, map[string]any{"id": j.ID, "outcome": outcome, "cost_usd": 0.0, "run": n, "replica": q.replica})
	if err := msg.DoubleAck(ctx); err != nil {
		q.log.Warn("subagent job not acked; a redelivery will be acked as finished", "agent", j.Parent, "subagent", j.ID, "error", err)
	}
}

// setState applies fn to the subagent's registry record, creating it
// from j when missing (its spawner could not write it). Failures are
// logged: the registry is what lists and counts show.
func (q *queue) setState(ctx context.Context, j job, fn func(*background.Info)) {
	err := q.reg.update(ctx, j.Parent, func(g *registry) error {
		i := g.Subs[j.ID]
		if i == nil {
			i = &background.Info{ID: j.ID, Task: textclip.Runes(j.Task, background.TaskClip, "…"), State: background.StateQueued, Queued: j.Queued, Key: j.Key}
			g.Subs[j.ID] = i
		}
		fn(i)
		return nil
	})
	if err != nil {
		q.log.Warn("subagent registry not updated", "agent", j.Parent, "subagent", j.ID, "error", err)
	}
}
