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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/adk/agent"
	"google.golang.org/adk/agent/llmagent"
	"google.golang.org/adk/model"
	"google.golang.org/adk/plugin"
	"google.golang.org/adk/runner"
	"google.golang.org/adk/session"
	"google.golang.org/adk/tool"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/money"
	"github.com/agent-worker/agent-worker/natsbus"
	"github.com/agent-worker/agent-worker/seal"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/tools"
	"github.com/agent-worker/agent-worker/tracing"
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

// Spec is how one parent's subagents run.
type Spec struct {
	// Max is how many may be in flight (queued or running, anywhere) at
	// once (default 3).
	Max int
	// BudgetUSD stops one subagent at this cost (all its runs); 0 = none.
	BudgetUSD float64
	// Timeout stops one run of a subagent that runs longer (default 10m).
	Timeout time.Duration
	// Instruction precedes every task.
	Instruction string
	// Model returns a fresh model instance for one subagent.
	Model func() (model.LLM, error)
	// Price prices the model's usage; Priced false means $0.
	Price  guard.Price
	Priced bool
	// Tools returns the subagent's tools (never spawn_subagent).
	Tools func() ([]tool.Tool, error)
}

// Options configure a Manager. Clock, Log, Events and Charger serve both
// modes; the rest only the distributed one (JetStream set).
type Options struct {
	Clock  clock.Clock
	Log    *slog.Logger
	Events *events.Bus
	// Charger is the parents' guardrails. In distributed mode it is used
	// on the parent's owner only.
	Charger Charger

	// JetStream, when set, runs subagents as jobs any replica takes (the
	// package documentation); NATS and Store are then required. Nil:
	// local mode.
	JetStream jetstream.JetStream
	NATS      *nats.Conn
	// Store holds the registry and the charges' claimed keys.
	Store    store.Store
	Subjects natsbus.Subjects
	// Stream is the work-queue stream of jobs and charge records; default
	// "AGENTS_SUBAGENTS". DuplicateWindow is its duplicate window
	// (default 2m).
	Stream          string
	DuplicateWindow time.Duration
	// Replicas is how many copies JetStream keeps of that stream
	// (nats.replicas; natsbus.StreamSpec.Replicas). Zero creates it with
	// 1 and leaves an existing stream's count as it is.
	Replicas int
	// MaxConsumers is that stream's consumer limit
	// (natsbus.StreamSpec.MaxConsumers): it holds a charges consumer per
	// parent agent and the runners'. Zero leaves it to the server's
	// default (1,000 per stream).
	MaxConsumers int
	// Replica names this replica (its lease holder) in the registry.
	Replica string
	// MaxPerReplica is how many subagents (of any parent) this replica
	// runs at once; 0 runs none here.
	MaxPerReplica int
	// AckWait is how long a job or charge record delivered to a replica
	// that stopped answering waits before it is delivered again; default
	// 30s. Running jobs get in-progress acks every third of it.
	AckWait time.Duration
	// MaxRuns is how many times one subagent is started before it is
	// reported failed instead of run again; default 3.
	MaxRuns int
	// ReportMaxBytes bounds a report's encoded body (the binding's
	// nats.max_message_bytes); default 65536.
	ReportMaxBytes int
	// Seal is the deployment's key (package seal), shared by every
	// replica: over NATS, jobs, charge records, notices, admissions and
	// reports carry its seal, and a message of the protocol without one is
	// refused. Required with JetStream; the zero Key refuses them all.
	Seal seal.Key
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

type family struct {
	name    string
	parent  Parent
	spec    Spec
	running map[string]*sub // running in this process
	spawnMu sync.Mutex      // one spawn at a time (distributed: read cap, queue)
	// keyed maps the newest keyedKeep spawn keys to their subagents' ids
	// (local mode; under Manager.mu), in order in keys.
	keyed map[string]string
	keys  []string
}

// keyedKeep bounds how many spawn keys a local parent remembers.
const keyedKeep = 256

// remember records that key spawned id.
func (f *family) remember(key, id string) {
	if f.keyed == nil {
		f.keyed = map[string]string{}
	}
	f.keyed[key] = id
	f.keys = append(f.keys, key)
	if len(f.keys) > keyedKeep {
		delete(f.keyed, f.keys[0])
		f.keys = f.keys[1:]
	}
}

type sub struct {
	id      string
	task    string
	cancel  context.CancelCauseFunc
	spent   float64 // this run's spend
	prior   float64 // earlier runs' spend (distributed)
	calls   int     // model responses charged in this run
	run     int     // this run's number, from 1
	queued  time.Time
	started time.Time
	stopBy  string        // local: who asked it to stop
	remote  bool          // distributed: run for a job
	job     jetstream.Msg // distributed: the job's newest delivery (under Manager.mu)
	// link is the spawning turn's traceparent; trace the run's own, once
	// it started (its report carries it, so the parent's turn links back).
	link, trace string
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

// defaultTimeout is Spec.Timeout's default.
const defaultTimeout = 10 * time.Minute

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

// Guard returns the hook the driver calls when this replica has restored
// an agent it owns (driver.Guard's Restore, listed after the guardrails):
// from then on the parent's charge records are consumed and applied
// here, and its subagents' admit requests answered. Its other methods do
// nothing.
func (m *Manager) Guard() driver.Guard { return ownerHook{m} }

type ownerHook struct{ m *Manager }

func (h ownerHook) Attach(string, driver.Control) {}

func (h ownerHook) Restore(_ context.Context, agent string) error {
	if h.m.remote != nil {
		h.m.remote.restored(agent)
	}
	return nil
}

func (h ownerHook) Admit(context.Context, string) error { return nil }
func (h ownerHook) BeginTurn(string, driver.TurnInfo)   {}
func (h ownerHook) EndTurn(string)                      {}
func (h ownerHook) Plugin(string) *plugin.Plugin        { return nil }

// Spawner returns the tools' handle for parent's subagents.
func (m *Manager) Spawner(parent string) tools.Spawner { return spawner{m, parent} }

type spawner struct {
	m      *Manager
	parent string
}

func (s spawner) Spawn(ctx context.Context, task, key string) (string, error) {
	return s.m.spawn(tracing.TraceParent(ctx), s.parent, task, key)
}
func (s spawner) Stop(id string) error {
	return s.m.StopBy(context.Background(), s.parent, id, ByParent)
}

// Running returns how many subagents of parent are running: in local
// mode, in this process; in distributed mode, on any replica, from the
// registry, so every replica gives the same count (if the store cannot
// be read, the last count read). Queued ones, waiting for a replica with
// room, are not counted here (List shows them); they do count against
// Spec.Max. A subagent whose replica died counts until its job is
// delivered again (nats.ack_wait) and another replica runs it, or it is
// reported failed.
func (m *Manager) Running(parent string) int {
	m.mu.Lock()
	f := m.parents[parent]
	n := 0
	if f != nil {
		n = len(f.running)
	}
	m.mu.Unlock()
	if f == nil || m.remote == nil {
		return n
	}
	return m.remote.running(parent)
}

// List returns parent's subagents, newest first: live ones and the
// newest finished ones. In distributed mode it reads the registry, the
// same from every replica; in local mode this process's.
func (m *Manager) List(ctx context.Context, parent string) ([]Info, error) {
	m.mu.Lock()
	f := m.parents[parent]
	var out []Info
	if f != nil && m.remote == nil {
		for _, s := range f.running {
			out = append(out, s.info(m.o.Replica, StateRunning))
		}
		out = append(out, m.finished[parent]...)
	}
	m.mu.Unlock()
	if f == nil {
		return nil, fmt.Errorf("%w: %q may not spawn subagents", ErrNotParent, parent)
	}
	if m.remote != nil {
		g, err := m.remote.reg.get(ctx, parent)
		if err != nil {
			return nil, err
		}
		return g.list(), nil
	}
	sortInfos(out)
	return out, nil
}

func (s *sub) info(replica, state string) Info {
	started := s.started
	return Info{ID: s.id, Task: clipRunes(s.task, TaskClip), State: state, Replica: replica, Runs: max(s.run, 1),
		Queued: s.queued, Started: &started, SpentUSD: s.prior + s.spent, StopRequestedBy: s.stopBy}
}

// Spawn starts a subagent of parent on task (distributed: queues its
// job).
func (m *Manager) Spawn(parent, task string) (string, error) { return m.SpawnKeyed(parent, task, "") }

// SpawnKeyed is Spawn made idempotent by key (the spawning tool call's
// action id, journal.ActionID): a spawn under a key already spawned
// starts nothing and returns the first subagent's id — whether it still
// runs in this process or finished (the newest keyedKeep keys), or,
// distributed, has a record in the parent's registry (queued, running or
// finished; the job carries the key to the replica that records it). So a
// turn resumed from its journal that spawns again finds the first. Not
// covered: a local subagent that died with its process (it is started
// again: its report was lost with it), and, distributed, a respawn in the
// moment between the job's publish and its first record.
func (m *Manager) SpawnKeyed(parent, task, key string) (string, error) {
	return m.spawn("", parent, task, key)
}

// spawn is SpawnKeyed for a spawn made by a traced turn: link is the
// spawning tool call's traceparent ("" for none), which the subagent's
// run links to (and, distributed, its job carries).
func (m *Manager) spawn(link, parent, task, key string) (string, error) {
	if m.o.Charger != nil {
		if err := m.o.Charger.Admit(context.Background(), parent); err != nil {
			return "", fmt.Errorf("no subagent can start now: %w", err)
		}
	}
	m.mu.Lock()
	f := m.parents[parent]
	switch {
	case m.closing:
		m.mu.Unlock()
		return "", ErrShutdown
	case f == nil:
		m.mu.Unlock()
		return "", fmt.Errorf("agent %q may not spawn subagents", parent)
	case m.remote != nil:
		m.mu.Unlock()
		return m.remote.spawn(f, task, key, link)
	case key != "" && f.keyed[key] != "":
		id := f.keyed[key]
		m.mu.Unlock()
		m.o.Log.Info("subagent spawn repeated by a resumed turn; the first one stands", "agent", parent, "subagent", id)
		return id, nil
	case len(f.running) >= f.spec.Max:
		m.mu.Unlock()
		return "", limitError(f.spec.Max)
	}
	m.seq++
	id := parent + "-sub-" + strconv.Itoa(m.seq)
	if key != "" {
		f.remember(key, id)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	now := m.o.Clock.Now()
	s := &sub{id: id, task: task, cancel: cancel, run: 1, queued: now, started: now, link: link}
	f.running[id] = s
	m.wg.Add(1)
	m.mu.Unlock()

	m.o.Log.Info("subagent started", "agent", parent, "subagent", id)
	m.emit(parent, EventStarted, map[string]any{"id": id})
	go m.execute(ctx, f, s)
	return id, nil
}

func limitError(n int) error {
	return fmt.Errorf("%w: %d subagents are already running (the most this agent may run at once); wait for their reports", ErrLimit, n)
}

// execute runs s to its end under its timeout and finishes it. The
// caller did m.wg.Add(1).
func (m *Manager) execute(ctx context.Context, f *family, s *sub) {
	defer m.wg.Done()
	timer := m.o.Clock.AfterFunc(f.spec.Timeout, func() { s.cancel(context.DeadlineExceeded) })
	defer timer.Stop()
	text, err := m.run(ctx, f, s)
	m.finish(f, s, text, err, context.Cause(ctx))
}

// Stop stops a running subagent of parent at its request; its report
// says it was stopped.
func (m *Manager) Stop(parent, id string) error {
	return m.StopBy(context.Background(), parent, id, ByParent)
}

// StopBy stops a subagent of parent, wherever it runs, saying who asked
// ("its parent", "operator (token ops)"). It returns once the stop is
// recorded and announced: the subagent stops within a NATS round trip,
// or at once when still queued, and its report says "stopped by <by>".
// Errors: ErrNotParent, ErrUnknown (no such subagent), ErrFinished.
func (m *Manager) StopBy(ctx context.Context, parent, id, by string) error {
	m.mu.Lock()
	f := m.parents[parent]
	if f == nil {
		m.mu.Unlock()
		return fmt.Errorf("%w: %q may not spawn subagents", ErrNotParent, parent)
	}
	if m.remote != nil {
		m.mu.Unlock()
		return m.remote.stop(ctx, parent, id, by)
	}
	defer m.mu.Unlock()
	if s := f.running[id]; s != nil {
		if s.stopBy == "" {
			s.stopBy = by
		}
		s.cancel(stopCause(by))
		return nil
	}
	for _, i := range m.finished[parent] {
		if i.ID == id {
			return fmt.Errorf("%w: %s %s", ErrFinished, id, i.State)
		}
	}
	return fmt.Errorf("%w %q", ErrUnknown, id)
}

// run executes the subagent's task as one ADK run and returns its final
// text.
func (m *Manager) run(ctx context.Context, f *family, s *sub) (string, error) {
	llm, err := f.spec.Model()
	if err != nil {
		return "", err
	}
	var ts []tool.Tool
	if f.spec.Tools != nil {
		if ts, err = f.spec.Tools(); err != nil {
			return "", err
		}
	}
	a, err := llmagent.New(llmagent.Config{
		Name:        "subagent",
		Model:       llm,
		Instruction: strings.TrimSpace(f.spec.Instruction + "\nYou are a background subagent. Complete the task you are given and answer with the result; nobody can answer your questions."),
		Tools:       ts,
	})
	if err != nil {
		return "", err
	}
	r, err := runner.New(runner.Config{AppName: "agent-worker-subagent", Agent: a, SessionService: session.InMemoryService(),
		AutoCreateSession: true, PluginConfig: runner.PluginConfig{Plugins: []*plugin.Plugin{m.meter(f, s)}}})
	if err != nil {
		return "", err
	}
	ctx, span := m.startSpan(ctx, f, s)
	defer span.End()
	var text string
	for ev, err := range r.Run(ctx, f.name, s.id, genai.NewContentFromText(s.task, genai.RoleUser), agent.RunConfig{}) {
		if err != nil {
			return text, err
		}
		if ev != nil && ev.Content != nil && ev.Content.Role == genai.RoleModel {
			for _, p := range ev.Content.Parts {
				if p.Text != "" && !p.Thought {
					text = p.Text
				}
			}
		}
	}
	return text, ctx.Err()
}

// meter admits every model call (the parent not halted, no stop asked
// for), charges every completed response to the parent and stops the
// subagent at its budget.
func (m *Manager) meter(f *family, s *sub) *plugin.Plugin {
	p, _ := plugin.New(plugin.Config{
		Name: "subagent-meter",
		BeforeModelCallback: func(cctx agent.CallbackContext, _ *model.LLMRequest) (*model.LLMResponse, error) {
			if m.remote != nil {
				return nil, m.remote.admit(cctx, f, s)
			}
			if m.o.Charger != nil {
				if err := m.o.Charger.Admit(cctx, f.name); err != nil {
					s.cancel(haltCause(err.Error()))
					return nil, err
				}
			}
			return nil, nil
		},
		AfterModelCallback: func(cctx agent.CallbackContext, resp *model.LLMResponse, _ error) (*model.LLMResponse, error) {
			if resp == nil || resp.Partial || !f.spec.Priced {
				return nil, nil
			}
			cost := f.spec.Price.Cost(guard.UsageOf(resp.UsageMetadata, resp.CustomMetadata))
			m.mu.Lock()
			s.calls++
			call := s.calls
			m.mu.Unlock()
			if m.remote != nil {
				if err := m.remote.charge(cctx, f, s, call, cost); err != nil {
					s.cancel(err)
					return nil, err
				}
			} else if m.o.Charger != nil {
				m.o.Charger.Charge(f.name, cost)
			}
			m.mu.Lock()
			s.spent += cost
			total := s.prior + s.spent
			over := f.spec.BudgetUSD > 0 && total >= f.spec.BudgetUSD
			m.mu.Unlock()
			if over {
				s.cancel(errBudget)
				return nil, fmt.Errorf("%w: %s of %s", errBudget, money.USD(total), money.USD(f.spec.BudgetUSD))
			}
			return nil, nil
		},
	})
	return p
}

// outcomeOf classifies a finished run: its outcome and, unless it
// completed, why.
func outcomeOf(err, cause error) (outcome, why string) {
	switch {
	case errors.Is(cause, errStopped), errors.Is(cause, errParentHalted), errors.Is(cause, ErrShutdown), errors.Is(cause, errParentRemoved):
		return OutcomeStopped, cause.Error()
	case errors.Is(cause, context.DeadlineExceeded):
		return OutcomeTimeout, "it ran longer than its timeout"
	case cause != nil:
		return OutcomeFailed, cause.Error()
	case err != nil:
		return OutcomeFailed, err.Error()
	}
	return OutcomeCompleted, ""
}

// reportText is what the parent reads about a finished subagent.
func reportText(id, task, outcome, why, text string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Subagent %s %s", id, outcome)
	switch {
	case why == "":
	case outcome == OutcomeStopped && strings.HasPrefix(why, "stopped by "):
		fmt.Fprintf(&b, " %s", strings.TrimPrefix(why, "stopped ")) // "Subagent x stopped by its parent."
	default:
		fmt.Fprintf(&b, ": %s", why)
	}
	fmt.Fprintf(&b, ".\nTask: %s\n", task)
	switch {
	case outcome == OutcomeCompleted:
		fmt.Fprintf(&b, "Result:\n%s", text)
	case text != "":
		fmt.Fprintf(&b, "Last words:\n%s", text)
	}
	return b.String()
}

// finish reports the subagent's result (or why there is none) to its
// parent, which wakes for it. In distributed mode the report goes over
// NATS and the job is acked after, or handed back when this replica is
// shutting down before it finished.
func (m *Manager) finish(f *family, s *sub, text string, err, cause error) {
	outcome, why := outcomeOf(err, cause)
	if s.remote {
		// Still listed as running here until settled, so a redelivery
		// of its job meanwhile is not run a second time.
		m.remote.finish(f, s, outcome, why, text, err, cause)
		m.mu.Lock()
		delete(f.running, s.id)
		m.mu.Unlock()
		return
	}
	m.mu.Lock()
	delete(f.running, s.id)
	closing := m.closing
	spent := s.spent
	m.mu.Unlock()
	m.o.Log.Info("subagent finished", "agent", f.name, "subagent", s.id, "outcome", outcome, "cost_usd", spent, "error", err)
	m.emit(f.name, EventFinished, map[string]any{"id": s.id, "outcome": outcome, "cost_usd": spent})
	now := m.o.Clock.Now()
	m.mu.Lock()
	info := s.info(m.o.Replica, outcome)
	info.Finished = &now
	list := append([]Info{info}, m.finished[f.name]...)
	if len(list) > keepFinished {
		list = list[:keepFinished]
	}
	m.finished[f.name] = list
	m.mu.Unlock()
	if closing {
		return // the parent is stopping too; nothing would take the report
	}
	f.parent.Report(s.id, inbox.Message{ID: s.id, Source: "subagent:" + s.id, From: s.id, Text: reportText(s.id, s.task, outcome, why, text), TraceParent: s.trace})
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

// clipRunes cuts s to n runes, ending in "…" when cut.
func clipRunes(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j] + "…"
		}
		i++
	}
	return s
}
