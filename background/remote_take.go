package background

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/internal/textclip"
)

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
	j, run, ok := r.readJob(msg)
	if !ok {
		return false
	}
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
	return r.startRun(ctx, f, j, msg, run, rec)
}

// readJob reads the job msg holds and its delivery count (the run it
// starts). A message without metadata or the deployment's seal, or one
// that is not a readable job, is terminated: ok is false.
func (r *remote) readJob(msg jetstream.Msg) (j job, run int, ok bool) {
	o := r.opts()
	meta, err := msg.Metadata()
	if err != nil {
		o.Log.Warn("subagent job without JetStream metadata; terminated", "error", err)
		_ = msg.Term()
		return j, 0, false
	}
	if !r.sealed(msg.Subject(), msg.Headers(), msg.Data()) {
		r.forged("job", msg.Subject(), msg.Data())
		_ = msg.Term()
		return j, 0, false
	}
	if err := json.Unmarshal(msg.Data(), &j); err != nil || !token(j.ID) || !token(j.Parent) {
		o.Log.Error("unreadable subagent job; terminated", "error", err, "data", textclip.Runes(string(msg.Data()), 200, "…"))
		_ = msg.Term()
		return j, 0, false
	}
	return j, int(meta.NumDelivered), true
}

// startRun starts run number run of job j (delivered as msg) of family
// f, whose registry record is rec (nil if unknown), on a slot begin
// holds: the subagent is listed running here and in the registry, and
// executed; the slot is freed when it ends. On a shutdown begun
// meanwhile the job is handed back instead and it reports false.
func (r *remote) startRun(ctx context.Context, f *family, j job, msg jetstream.Msg, run int, rec *Info) bool {
	o := r.opts()
	m := r.m
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
