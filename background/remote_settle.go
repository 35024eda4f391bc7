package background

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/internal/textclip"
)

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

// setState applies fn to the subagent's registry record, creating it
// from j when missing (its spawner could not write it). Failures are
// logged: the registry is what lists and counts show.
func (r *remote) setState(ctx context.Context, j job, fn func(*Info)) {
	err := r.reg.update(ctx, j.Parent, func(g *registry) error {
		i := g.Subs[j.ID]
		if i == nil {
			i = &Info{ID: j.ID, Task: textclip.Runes(j.Task, TaskClip, "…"), State: StateQueued, Queued: j.Queued, Key: j.Key}
			g.Subs[j.ID] = i
		}
		fn(i)
		return nil
	})
	if err != nil {
		r.opts().Log.Warn("subagent registry not updated", "agent", j.Parent, "subagent", j.ID, "error", err)
	}
}
