package distributed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/background"
	"github.com/agent-worker/agent-worker/internal/textclip"
)

// takeJobs pulls one job per free slot until StopTaking.
func (q *queue) takeJobs() {
	defer close(q.loopDone)
	for {
		select {
		case q.slots <- struct{}{}:
		case <-q.take.Done():
			return
		}
		ctx, cancel := context.WithTimeout(q.take, fetchWait)
		msg, err := q.cons.Next(jetstream.FetchContext(ctx))
		cancel()
		if err != nil {
			<-q.slots
			if q.take.Err() != nil {
				return
			}
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
				q.log.Warn("subagents: cannot pull a job; retrying", "error", err)
				select {
				case <-time.After(time.Second):
				case <-q.take.Done():
					return
				}
			}
			continue
		}
		if !q.begin(msg) {
			<-q.slots
		}
	}
}

// StopTaking stops pulling jobs and waits until the take loop is gone,
// so no job starts afterwards.
func (q *queue) StopTaking() {
	q.stopTake()
	if q.loopDone != nil {
		<-q.loopDone
	}
}

// begin starts running the job msg holds, or settles it: a job already
// finished is acked, one run MaxRuns times or stopped while queued is
// reported and acked, one of a parent this replica does not know is
// left for another. It reports whether a run started (it then holds a
// slot until it ends).
func (q *queue) begin(msg jetstream.Msg) bool {
	o := &q.o
	j, n, ok := q.readJob(msg)
	if !ok {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	var rec *background.Info
	if g, err := q.reg.get(ctx, j.Parent); err != nil {
		q.log.Warn("subagent registry unreadable; running the job anyway", "agent", j.Parent, "subagent", j.ID, "error", err)
	} else {
		rec = g.Subs[j.ID]
	}
	here, known, closing := q.h.Here(j.Parent, j.ID)
	if r, ok := here.(*run); ok {
		// Delivered again while still running here (in-progress acks
		// were lost): answer through the newest delivery.
		r.redeliver(msg)
	}
	switch {
	case here != nil:
		return false
	case rec != nil && !rec.Live():
		q.log.Info("subagent job delivered again after it finished; acked", "agent", j.Parent, "subagent", j.ID, "state", rec.State)
		_ = msg.Ack()
		return false
	case closing:
		_ = msg.Nak()
		return false
	case n > o.MaxRuns:
		q.giveUp(j, msg, n, background.OutcomeFailed, fmt.Sprintf("it was started %d times and each time the replica running it stopped or died before it finished", n-1))
		return false
	case !known:
		q.log.Warn("subagent job of an agent this replica does not run; left for another replica", "agent", j.Parent, "subagent", j.ID)
		_ = msg.NakWithDelay(o.AckWait)
		return false
	case rec != nil && rec.StopRequestedBy != "":
		// Not running here, so Stop cancels nothing: it only names the
		// cause, as a running subagent's report would.
		cause := q.h.Stop(j.Parent, j.ID, rec.StopRequestedBy)
		q.giveUp(j, msg, n, background.OutcomeStopped, cause.Error()+" before it started")
		return false
	}
	return q.startRun(ctx, j, msg, n, rec)
}

// readJob reads the job msg holds and its delivery count (the run it
// starts). A message without metadata or the deployment's seal, or one
// that is not a readable job, is terminated: ok is false.
func (q *queue) readJob(msg jetstream.Msg) (j job, n int, ok bool) {
	meta, err := msg.Metadata()
	if err != nil {
		q.log.Warn("subagent job without JetStream metadata; terminated", "error", err)
		_ = msg.Term()
		return j, 0, false
	}
	if !q.sealed(msg.Subject(), msg.Headers(), msg.Data()) {
		q.forged("job", msg.Subject(), msg.Data())
		_ = msg.Term()
		return j, 0, false
	}
	if err := json.Unmarshal(msg.Data(), &j); err != nil || !token(j.ID) || !token(j.Parent) {
		q.log.Error("unreadable subagent job; terminated", "error", err, "data", textclip.Runes(string(msg.Data()), 200, "…"))
		_ = msg.Term()
		return j, 0, false
	}
	return j, int(meta.NumDelivered), true
}

// startRun starts run number n of job j (delivered as msg), whose
// registry record is rec (nil if unknown), on a slot begin holds: the
// Manager lists the subagent running here, the registry too, and it is
// executed; the slot is freed when it ends. On a shutdown begun meanwhile
// (or its parent removed) the job is handed back instead and it reports
// false.
func (q *queue) startRun(ctx context.Context, j job, msg jetstream.Msg, n int, rec *background.Info) bool {
	r := &run{q: q, parent: j.Parent, id: j.ID, task: j.Task, number: n, queued: j.Queued, msg: msg}
	take := background.Run{Parent: j.Parent, ID: j.ID, Task: j.Task, Number: n, Queued: j.Queued, Link: j.TraceParent, Job: r}
	if rec != nil {
		take.Prior = rec.SpentUSD
	}
	now := q.clock.Now()
	execute, ok := q.h.Take(take)
	if !ok {
		_ = msg.Nak()
		return false
	}
	q.setState(ctx, j, func(i *background.Info) {
		i.State, i.Replica, i.Runs, i.Started = background.StateRunning, q.replica, n, &now
	})
	q.log.Info("subagent started", "agent", j.Parent, "subagent", j.ID, "run", n, "replica", q.replica)
	q.h.Emit(j.Parent, background.EventStarted, map[string]any{"id": j.ID, "run": n, "replica": q.replica})
	go func() {
		defer func() { <-q.slots }()
		keep := r.keepAlive()
		defer keep()
		execute()
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
