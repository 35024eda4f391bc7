package background

import (
	"context"
	"time"
)

// Distributed is the distributed mode as the Manager uses it (package
// background/distributed implements it; Options.Distributed installs
// it): subagents queued as jobs that any replica takes, listed, stopped
// and charged across replicas. The Manager still decides what it can
// decide here — whether the parent is registered, whether it is shutting
// down — and runs the subagents this replica takes (Host).
type Distributed interface {
	// Start ensures the queue, answers the parents' owners' requests and
	// notices, and starts taking jobs (Manager.Start).
	Start(ctx context.Context) error
	// StopTaking stops taking jobs and returns once none will start
	// here: Shutdown calls it before it waits for the running ones.
	StopTaking()
	// Close stops answering for the parents owned here: the end of
	// Shutdown, once no subagent runs here.
	Close()

	// Spawn queues a subagent of parent on task and returns its id;
	// limit is the parent's cap (Spec.Max), key and link SpawnKeyed's key
	// and the spawning turn's traceparent. The Manager calls it for one
	// parent at a time. At the cap it returns ErrLimit itself.
	Spawn(parent string, limit int, task, key, link string) (string, error)
	// Stop records and announces a stop of parent's subagent id, wherever
	// it runs (StopBy). Errors: ErrUnknown, ErrFinished.
	Stop(ctx context.Context, parent, id, by string) error
	// Running counts parent's subagents running on any replica
	// (Manager.Running).
	Running(parent string) int
	// List returns parent's subagents on every replica, in any order
	// (Manager.List sorts them).
	List(ctx context.Context, parent string) ([]Info, error)

	// Restored: this replica owns parent and restored its guardrails (the
	// Guard hook's Restore).
	Restored(parent string)
	// Halted: parent was halted (events.Halted). Called inside the
	// event bus's Publish: it must not block.
	Halted(parent, reason string)
	// Ownership: this replica gained or lost parent's lease
	// (events.Ownership). Called inside Publish: it must not block.
	Ownership(parent string, owned bool)
}

// Host is the Manager as its distributed mode sees it: New hands one to
// Options.Distributed. Its methods are safe for concurrent use and do
// not block on anything but the Manager's lock.
type Host interface {
	// Emit publishes an event of agent on the Manager's bus.
	Emit(agent, typ string, data map[string]any)
	// Here tells whether parent is registered here (Add, and not
	// Remove), whether the Manager is shutting down, and, when its
	// subagent id runs in this process, that run's Job (nil otherwise, and
	// for id "").
	Here(parent, id string) (running Job, known, closing bool)
	// Take lists r as running here and returns the function that runs it
	// to its end (call it once, on a goroutine of its own: it returns
	// after r.Job's Finish). It refuses (ok false) while the Manager shuts
	// down or when r's parent is not registered here.
	Take(r Run) (execute func(), ok bool)
	// Stop cancels parent's subagent id if it runs here, as stopped by
	// by, and returns the cause it is (or would be) stopped with, which
	// its report states.
	Stop(parent, id, by string) error
	// Halt cancels parent's subagent id if it runs here (every one of
	// parent's when id is ""), because the parent is halted (reason), and
	// returns the cause, which the reports state.
	Halt(parent, id, reason string) error
	// ReportText is what the parent reads about a subagent that ended
	// with outcome (and why, unless it completed; text is its answer).
	ReportText(id, task, outcome, why, text string) string
	// Drained is closed when the shutdown drain is over: a report or a
	// charge still waiting for NATS is given up then.
	Drained() <-chan struct{}
}

// Run is one run of a subagent that the distributed mode took from its
// queue to run here (Host.Take).
type Run struct {
	Parent, ID, Task string
	// Number is this run's, from 1: more than 1 when an earlier run's
	// replica died or stopped.
	Number int
	Queued time.Time
	// Prior is what its earlier runs spent, counted against its budget.
	Prior float64
	// Link is the spawning turn's traceparent ("" for none).
	Link string
	// Job is the queue's side of this run, which the Manager calls while
	// it lasts.
	Job Job
}

// Job is the distributed mode's side of one run of a subagent here.
type Job interface {
	// Admit is called before each model call; an error refuses it. A
	// stop asked for or a refusal by the parent's owner cancels the run
	// (through the Host) before it is returned.
	Admit(ctx context.Context) error
	// Charge charges one priced model response (call numbers from 1) to
	// the parent; an error fails the run.
	Charge(call int, usd float64) error
	// Finish settles the ended run: its report is delivered and its job
	// acked, or the job handed back. The run is listed as running here
	// until Finish returns.
	Finish(e End)
}

// End is how a run ended, for Job.Finish.
type End struct {
	// Outcome is one of the Outcome constants; Report what the parent
	// reads (ReportText), Trace the run's traceparent, which the report
	// carries.
	Outcome, Report, Trace string
	// Spent is what this run spent.
	Spent float64
	// Err is the run's error, for the log.
	Err error
	// Shutdown: this replica's shutdown stopped the run; its job is
	// handed back, not reported.
	Shutdown bool
}

// host is the Manager's Host.
type host struct{ m *Manager }

func (h host) Emit(agent, typ string, data map[string]any) { h.m.emit(agent, typ, data) }

func (h host) Here(parent, id string) (running Job, known, closing bool) {
	m := h.m
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.parents[parent]
	if f != nil {
		if s := f.running[id]; s != nil {
			running = s.job
		}
	}
	return running, f != nil, m.closing
}

func (h host) Take(r Run) (execute func(), ok bool) {
	m := h.m
	ctx, cancel := context.WithCancelCause(context.Background())
	s := &sub{id: r.ID, task: r.Task, cancel: cancel, run: r.Number, queued: r.Queued, started: m.o.Clock.Now(),
		prior: r.Prior, link: r.Link, job: r.Job}
	m.mu.Lock()
	f := m.parents[r.Parent]
	if m.closing || f == nil {
		m.mu.Unlock()
		cancel(ErrShutdown)
		return nil, false
	}
	f.running[r.ID] = s
	m.wg.Add(1)
	m.mu.Unlock()
	return func() { m.execute(ctx, f, s) }, true
}

func (h host) Stop(parent, id, by string) error {
	cause := stopCause(by)
	h.cancel(parent, id, cause)
	return cause
}

func (h host) Halt(parent, id, reason string) error {
	cause := haltCause(reason)
	if id == "" {
		h.m.cancelParent(parent, cause)
	} else {
		h.cancel(parent, id, cause)
	}
	return cause
}

// cancel cancels parent's subagent id if it runs here.
func (h host) cancel(parent, id string, cause error) {
	m := h.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if f := m.parents[parent]; f != nil {
		if s := f.running[id]; s != nil {
			s.cancel(cause)
		}
	}
}

func (h host) ReportText(id, task, outcome, why, text string) string {
	return reportText(id, task, outcome, why, text)
}

func (h host) Drained() <-chan struct{} { return h.m.hardStop }
