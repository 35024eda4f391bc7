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
// Local (Options.Distributed nil): a subagent runs in its parent's
// process; its report goes straight into the parent's inbox
// (Parent.Report) and its spend to Charger.Charge. Not guaranteed: a
// subagent's result is held in memory until its parent takes it, and a
// worker that dies first loses it.
//
// Distributed (Options.Distributed set, to package
// background/distributed's New): subagents run anywhere. Spawn queues a
// job on a JetStream work queue that every replica with room takes; the
// report reaches the parent's inbox over NATS, whichever replica owns it
// then, and the spend is charged on the parent's owner. That package's
// documentation states the protocol and what it guarantees. The Manager
// holds it as a Distributed and is its Host: the Manager keeps the caps,
// runs the subagents this replica takes, and meters their model calls.
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
	hardStop    chan struct{}
	stopOnce    sync.Once
	evSub       *events.Subscription
	distributed Distributed // nil in local mode
	// finished keeps the newest finished subagents of each parent for
	// List, in local mode.
	finished map[string][]Info
}

// New returns a Manager. With Options.Distributed it is in distributed
// mode: call Start before jobs can run here, after adding the parents.
func New(o Options) *Manager {
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{o: o, parents: map[string]*family{}, hardStop: make(chan struct{}), finished: map[string][]Info{}}
	if o.Distributed != nil {
		m.distributed = o.Distributed(host{m}, o)
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
		if m.distributed != nil {
			m.distributed.Halted(e.Agent, reason)
			return
		}
		m.cancelParent(e.Agent, haltCause(reason))
	case events.Ownership:
		if m.distributed != nil {
			owned, _ := e.Data["owned"].(bool)
			m.distributed.Ownership(e.Agent, owned)
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
	if m.distributed == nil {
		return nil
	}
	return m.distributed.Start(ctx)
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
	if m.distributed != nil {
		m.distributed.StopTaking() // no job starts (no wg.Add) after this
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
	if m.distributed != nil {
		m.distributed.Close()
	}
	if m.evSub != nil {
		m.evSub.Close()
	}
}
