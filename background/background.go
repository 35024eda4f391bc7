// Package background runs agents' subagents: self-contained tasks an
// agent hands off with the spawn_subagent tool, run in the background
// while the agent sleeps, whose results land in the agent's inbox and wake
// it. It enforces the caps (how many at once per parent and per replica, a
// budget and a timeout each), charges every subagent's spend to its
// parent's ceilings, stops subagents when their parent is halted or asks,
// and on shutdown stops them within a bounded drain time. It must not
// outlive that drain.
//
// # Two modes
//
// Local (Options.JetStream nil: core NATS, or no NATS at all): a subagent
// runs in its parent's process; its report goes straight into the
// parent's inbox (Parent.Report) and its spend to Charger.Charge.
//
// Distributed (Options.JetStream set): subagents run anywhere. Spawn, on
// the parent's owner, publishes a job to the work-queue stream
// (Options.Stream, subject <prefix>._subagents.jobs, Nats-Msg-Id the
// subagent's id); every replica with room (Options.MaxPerReplica) pulls
// jobs from one durable consumer they share and runs them. While it runs
// a subagent:
//
//   - the running replica sends in-progress acks every AckWait/3, and acks
//     the job only once its report is published;
//   - before each model call it reads the parent's registry (a stop asked
//     for) and asks the parent's owner on <prefix>._subagents.admit.<parent>
//     (request/reply; only the owner answers, with its guardrails' Admit),
//     waiting while no owner answers (a lease moving), so no model call
//     is made without the owner's admission;
//   - after each model response it publishes a charge record to
//     <prefix>._subagents.charges.<parent> (same stream; Nats-Msg-Id
//     "charge-<id>-<run>-<call>") and waits for JetStream's ack;
//   - the owner halting the parent (a guardrail trip) publishes a notice
//     on <prefix>._subagents.notice.<parent>; stop_subagent and the API's
//     stop record the stop in the registry and publish one too; the
//     running replica cancels the subagent at once (its model call too),
//     reporting "stopped: parent halted" or "stopped by ...";
//   - the report is published to the parent's inbox subject with
//     Nats-Msg-Id = natsbus.MsgID(parent, the subagent's id) and the
//     subagent's id in its envelope, and the header Agent-Worker-Via:
//     subagent, so it is durable, deduplicated, and reaches whichever
//     replica owns the parent then, which wakes it with source subagent.
//
// Every message of this protocol — jobs, charge records, notices,
// admissions, reports — carries the deployment's seal (Options.Seal,
// package seal) over its subject, Nats-Msg-Id and body, and one without
// it is refused and logged: the subjects are NATS subjects a stranger may
// reach, and a forged job would spend money, a forged charge move a
// parent's spend, a forged report wake the parent as a subagent. A charge
// record's cost is never negative.
//
// The parent's owner (the replica holding its lease, once its guardrails
// are restored: Guard's Restore) consumes the parent's charge records
// from a durable consumer of its own and applies each through
// Charger.Charge once: the record's key (subagent id, run, call number)
// is claimed in the store (set-if-absent, kept 7 days) before it is
// charged, so a redelivered or republished record is acked without a
// second charge. The registry (store key subagents.<parent>) lists each
// subagent's state, replica, start and spend for List and Running, from
// every replica.
//
// Guarantees (distributed): a spawned subagent is never silently lost.
// If the replica running it dies, its job is delivered again once the
// stream's ack wait passes (Options.AckWait; nats.ack_wait) and run again
// from the start by a replica with room; after MaxRuns starts it is not
// run again but reported failed to its parent. A replica that shuts down
// hands its unfinished jobs back (nak) for another to run at once. Each
// charge record reaches the parent's ledger once. A parent's halt stops
// its subagents on every replica within a NATS round trip (the notice),
// or at their next model call if the notice was missed. The parent gets
// one report per subagent: its Nats-Msg-Id is derived from the subagent's id,
// and a job delivered again after its report was recorded is acked, not
// run.
//
// Not guaranteed: a subagent run again starts over: what its earlier run
// did and spent stays done and charged (its budget counts every run; its
// timeout is per run). The parent's cap (Spec.Max) is checked by its
// owner; while its lease moves, two replicas could each admit one. A
// report is cut to fit nats.max_message_bytes. A charge that cannot be
// published for 30 seconds (NATS down) fails the subagent and is logged,
// not charged; an owner that dies between claiming a charge's key and
// charging it loses that one charge. A replica that dies between
// publishing a report and recording it leaves the job to be run again;
// that run's report is dropped as a duplicate if it comes within the
// inbox stream's duplicate window (nats.duplicate_window) or after the
// parent handled the first, and queued a second time otherwise. A
// replica that died with a job leaves it shown running on that replica
// until it is delivered again. A job no replica takes within the stream's
// max age (7 days) is dropped by the stream and stays listed queued. In
// local mode, a subagent's result is held in memory until its parent
// takes it, and a worker that dies first loses it.
package background

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/inbox"
)

// Event types.
const (
	EventStarted  = "subagent-started"
	EventFinished = "subagent-finished" // Data: id, outcome, cost_usd (this run's)
	// EventQueued: a subagent's job was queued (distributed mode, on the
	// parent's owner). Data: id.
	EventQueued = "subagent-queued"
	// EventRequeued: this replica stopped running a subagent before it
	// finished (shutdown) and handed its job back to be run again. Data:
	// id, run.
	EventRequeued = "subagent-requeued"
	// EventCharged: the parent's owner charged one of its subagents'
	// model calls. Data: id, run, call, cost_usd.
	EventCharged = "subagent-charged"
	// EventChargeDuplicate: a charge record already charged arrived again
	// and was acked without charging. Data: id, run, call, cost_usd.
	EventChargeDuplicate = "subagent-charge-duplicate"
)

// Outcomes of a subagent.
const (
	OutcomeCompleted = "completed"
	OutcomeFailed    = "failed"
	OutcomeStopped   = "stopped"
	OutcomeTimeout   = "timeout"
)

// Errors.
var (
	ErrLimit    = errors.New("subagent limit reached")
	ErrUnknown  = errors.New("unknown subagent")
	ErrShutdown = errors.New("worker shutting down")
	// ErrFinished: Stop of a subagent that already finished.
	ErrFinished = errors.New("subagent already finished")
	// ErrNotParent: the agent may not spawn subagents (it is not granted
	// spawn_subagent).
	ErrNotParent = errors.New("agent has no subagents")
	errBudget    = errors.New("subagent budget spent")
	// errStopped is wrapped by the cause of a stop asked for (by the
	// parent or an operator).
	errStopped = errors.New("stopped")
	// errParentHalted is wrapped by the cause of a stop because the
	// parent is halted.
	errParentHalted = errors.New("parent halted")
)

// stopCause is the cause a subagent stopped at by's request is cancelled
// with: "stopped by its parent".
func stopCause(by string) error { return fmt.Errorf("%w by %s", errStopped, by) }

// haltCause is the cause a subagent whose parent is halted is cancelled
// with: "parent halted (reason)".
func haltCause(reason string) error { return fmt.Errorf("%w (%s)", errParentHalted, reason) }

// ByParent is who stops a subagent through stop_subagent.
const ByParent = "its parent"

// Parent is an agent that spawns subagents; the driver's agent is one.
type Parent interface {
	Report(subagent string, m inbox.Message)
}

// Charger is the parent's cost guardrails.
type Charger interface {
	// Charge adds a subagent's spend to its parent.
	Charge(agent string, usd float64)
	// Admit refuses when the parent is halted by a guardrail.
	Admit(ctx context.Context, agent string) error
}

// Manager runs every agent's subagents.
type Manager struct {
	o       Options
	mu      sync.Mutex
	parents map[string]*family
	seq     int
	closing bool
	wg      sync.WaitGroup
	// hardStop is closed when the shutdown drain is over: a report still
	// waiting to be published is given up (its job handed back).
	hardStop chan struct{}
	stopOnce sync.Once
	evSub    *events.Subscription
	remote   *remote // nil in local mode
	// finished keeps the newest finished subagents of each parent for
	// List, in local mode.
	finished map[string][]Info
}

// New returns a Manager. With Options.JetStream it is in distributed mode:
// call Start before jobs can run here, after adding the parents.
func New(o Options) *Manager {
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{o: o, parents: map[string]*family{}, hardStop: make(chan struct{}), finished: map[string][]Info{}}
	if o.JetStream != nil {
		m.remote = newRemote(m)
	}
	if o.Events != nil {
		// The bus calls a filter in Publish, in publish order: the owner
		// side learns of halts and ownership changes as they happen,
		// before the driver goes on (for ownership: before it restores
		// the agent). The filter only records and signals; nothing is
		// delivered on the subscription.
		m.evSub = o.Events.Subscribe(1, func(e events.Event) bool {
			m.observe(e)
			return false
		})
	}
	return m
}

// observe reacts to a parent's halt and ownership events. It runs inside
// events.Bus.Publish, so it must not block nor publish events; nothing
// holding m.mu ever publishes one.
func (m *Manager) observe(e events.Event) {
	switch e.Type {
	case events.Halted:
		reason, _ := e.Data["reason"].(string)
		if m.remote != nil {
			m.remote.parentHalted(e.Agent, reason)
			return
		}
		m.cancelParent(e.Agent, haltCause(reason))
	case events.Ownership:
		if m.remote != nil {
			owned, _ := e.Data["owned"].(bool)
			m.remote.ownership(e.Agent, owned)
		}
	}
}

// cancelParent cancels every subagent of parent running in this process.
func (m *Manager) cancelParent(parent string, cause error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f := m.parents[parent]; f != nil {
		for _, s := range f.running {
			s.cancel(cause)
		}
	}
}

// Add registers a parent agent and how its subagents run (Set).
func (m *Manager) Add(name string, p Parent, s Spec) { m.Set(name, p, s) }

// Start, in distributed mode, ensures the stream and the runners'
// consumer, answers admit requests and notices, and starts taking jobs
// when MaxPerReplica > 0. Add the parents first: a job of a parent this
// replica does not know is left for another. A no-op in local mode.
func (m *Manager) Start(ctx context.Context) error {
	if m.remote == nil {
		return nil
	}
	return m.remote.start(ctx)
}

func (m *Manager) emit(agent, typ string, data map[string]any) {
	if m.o.Events != nil {
		m.o.Events.Publish(events.Event{Time: m.o.Clock.Now(), Agent: agent, Type: typ, Data: data})
	}
}

// Shutdown stops accepting subagents (and, distributed, taking jobs),
// lets running ones finish until ctx ends, then stops them and waits for
// them to return; distributed, their jobs are handed back for another
// replica to run. It then stops answering for the parents owned here.
// Calling it again is harmless.
func (m *Manager) Shutdown(ctx context.Context) {
	m.mu.Lock()
	m.closing = true
	m.mu.Unlock()
	if m.remote != nil {
		m.remote.stopTaking() // no job starts (no wg.Add) after this
	}
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		m.stopOnce.Do(func() { close(m.hardStop) })
		m.mu.Lock()
		for _, f := range m.parents {
			for _, s := range f.running {
				s.cancel(ErrShutdown)
			}
		}
		m.mu.Unlock()
		<-done
	}
	if m.remote != nil {
		m.remote.close()
	}
	if m.evSub != nil {
		m.evSub.Close()
	}
}
