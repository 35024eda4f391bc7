package driver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/adk/model"
	"google.golang.org/adk/tool"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/scheduler"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/tools"
	"github.com/agent-worker/agent-worker/turnlog"
)

// AppName is the ADK application name every agent runs under.
const AppName = "agent-worker"

// MaxAttempts is how many failed turns a message may be drained into
// before it is dropped.
const MaxAttempts = 3

// Errors a turn can end with (context causes) and operator calls return.
var (
	ErrTurnTimeout  = errors.New("turn timed out")
	ErrInterrupted  = errors.New("turn interrupted by operator")
	ErrShutdown     = errors.New("worker shutting down")
	ErrUnknownAgent = errors.New("unknown agent")
	ErrStopped      = errors.New("agent is stopped")
	// ErrNotPaused is a resume of an agent that is neither paused nor
	// halted: there is no gate to open, and no turn is run (wake runs one).
	ErrNotPaused = errors.New("not paused")
)

// Spec is one agent as the driver needs it, resolved from config.
type Spec struct {
	Name        string
	Instruction string
	// Model is this agent's own model instance (scripted models keep one
	// cursor per instance).
	Model model.LLM
	// Tools are built-in tool names (see package tools).
	Tools []string
	// Toolsets add tools asked for before each model call (the agent's
	// MCP tools, package mcptools).
	Toolsets []tool.Toolset
	// Publish lists the subject patterns the publish tool may use.
	Publish []string
	// HTTPGet lists the URL prefixes the http_get tool may read.
	HTTPGet []string
	// HTTPGetAllowPrivate lets http_get reach loopback, private and CGNAT
	// addresses (see tools.Env.HTTPAllowPrivate).
	HTTPGetAllowPrivate bool
	// Schedules are the agent's cron schedules.
	Schedules []scheduler.Schedule
	// Sleep bounds model-requested wakes.
	Sleep tools.Sleep
	// Heartbeat wakes the agent this long after a turn that asked for no
	// wake; zero means no heartbeat.
	Heartbeat time.Duration
	// InboxCap bounds the inbox (inbox.DefaultCap when zero).
	InboxCap int
	// TurnTimeout cancels a longer turn; zero means none.
	TurnTimeout time.Duration
	// MaxTurnsPerWake bounds back-to-back turns before the agent must
	// sleep max(Sleep.Min, 1s). Default 10.
	MaxTurnsPerWake int
	// Coalesce delays a turn from sleep until this long after the first
	// wake, so bursts coalesce; zero starts at once.
	Coalesce time.Duration
	// HistoryTurns is how many past turns the model sees (at least 1).
	HistoryTurns int
	// Retry spaces the automatic retries of failed turns.
	Retry Backoff
	// MaxInputBytes bounds the message text one turn takes (wake messages
	// first); the rest waits for the next turn, which follows at once
	// while wake messages remain. Zero: a turn takes everything.
	MaxInputBytes int
	// TurnsPerHour limits how many turns the agent runs an hour, whatever
	// wakes it; TurnBurst of them may run back to back first. Zero: no
	// limit.
	TurnsPerHour int
	TurnBurst    int
	// Memory folds turns that leave the window into a running memory
	// (memory.go). Zero: off.
	Memory MemorySpec
	// Approval lists the tools (as the model sees them) whose calls wait
	// for an operator's approval (approval.go); ApprovalTTL is how long a
	// held call waits (default DefaultApprovalTTL).
	Approval    []string
	ApprovalTTL time.Duration
	// ResumeWithin: an unfinished turn journal older than this is
	// abandoned instead of resumed (journal.go). Default
	// DefaultResumeWithin.
	ResumeWithin time.Duration
	// ResumeWait bounds how long, from the agent's start, a resume waits
	// for the journal's messages to be back in the inbox (default
	// DefaultResumeWait; the worker sets 10s: they are read from the log
	// at once).
	ResumeWait time.Duration
}

// Health says whether the dependencies a turn needs (the store, NATS) are
// up; health.Monitor implements it. While Unavailable returns an error,
// turns wait: no model is called and nothing counts against the messages.
type Health interface {
	// Unavailable returns why turns must wait, or nil. It must not block.
	Unavailable() error
	// Failed reports a dependency failure seen during a turn, so the
	// health is checked again at once.
	Failed(err error)
}

// Subagents hands each agent its spawner of background subagents.
type Subagents interface {
	Spawner(parent string) tools.Spawner
}

// Deps are the driver's collaborators.
type Deps struct {
	Clock  clock.Clock  // default clock.Real()
	Store  store.Store  // required: history lives here
	Events *events.Bus  // default: a private bus
	Log    *slog.Logger // default: discard
	Guards []hook.Guard // optional; consulted in order (see package hook)
	// Publisher serves the publish tool; agents granted it need one.
	Publisher tools.Publisher
	// SubjectPrefix is the worker's nats.subject_prefix, under which the
	// publish tool refuses the worker's own subjects ("": the default).
	SubjectPrefix string
	// Subagents serves the spawn_subagent and stop_subagent tools; agents
	// granted them need it.
	Subagents Subagents
	// Leased starts every agent in standby: it runs turns only after
	// SetOwned(true) (a lease manager decides). False: all agents are
	// owned from the start.
	Leased bool
	// Scheduler fires the agents' schedules and timers. Default: one over
	// Store and Clock. The driver adds its agents, starts it in Start and
	// stops it in Shutdown. Its Owner (scheduler.Options.Owner) also fences
	// the agents' own durable writes (pause): see Scheduler.Owns.
	Scheduler *scheduler.Scheduler
	// Health, when set, holds turns while a dependency is down. Call
	// Driver.Recovered when it is back.
	Health Health
	// Input is the agents' durable input log (JetStream mode); nil: every
	// message reaches the agents through Send and memory alone holds it.
	Input Log
	// Tracer starts each turn's span (trace.go); nil: turns are not
	// traced. ADK's own spans under it come from the global provider,
	// which tracing.Start sets to the same one.
	Tracer trace.Tracer
}

// Driver owns the loops of all configured agents.
type Driver struct {
	deps    Deps
	records *turnlog.Log // turn summaries and dead-letter records
	// mu guards agents and order, which a reload changes (specs.go);
	// loops is the context the loops run under, from Start.
	mu     sync.RWMutex
	agents map[string]*Agent
	order  []string
	loops  context.Context
	// restoring holds the agents' restore lanes (restoreLanes).
	restoring chan struct{}
	wg        sync.WaitGroup
	once      sync.Once
}

// New builds the agents. It fails on an agent the driver cannot run (bad
// tools, duplicate names); nothing is started until Run.
func New(deps Deps, specs []Spec) (*Driver, error) {
	if deps.Store == nil {
		return nil, errors.New("driver: a store is required")
	}
	if deps.Clock == nil {
		deps.Clock = clock.Real()
	}
	if deps.Log == nil {
		deps.Log = slog.New(slog.DiscardHandler)
	}
	if deps.Events == nil {
		deps.Events = events.NewBus(0, deps.Log)
	}
	if deps.Scheduler == nil {
		deps.Scheduler = scheduler.New(scheduler.Options{Store: deps.Store, Clock: deps.Clock, Log: deps.Log, Events: deps.Events})
	}
	traced := deps.Tracer != nil
	if !traced {
		deps.Tracer = noTracer
	}
	d := &Driver{deps: deps, records: turnlog.New(deps.Store, deps.Log), agents: map[string]*Agent{}}
	if traced {
		deps.Events.Tap(d.spanEvent)
	}
	restoring := make(chan struct{}, restoreLanes)
	d.restoring = restoring // agents a reload adds share the lanes (specs.go)
	seen := map[string]bool{}
	for _, s := range specs {
		if seen[s.Name] {
			return nil, fmt.Errorf("driver: agent %q defined twice", s.Name)
		}
		seen[s.Name] = true
	}
	// The agents are built on every core (with thousands of agents,
	// building their ADK agents and tools is most of a start), then
	// registered in order.
	type built struct {
		a    *Agent
		bind func(*Agent)
		err  error
	}
	out := make([]built, len(specs))
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, s := range specs {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			hist, bind := newHistory(deps.Store, s)
			a, err := newAgent(s, deps, hist)
			out[i] = built{a, bind, err}
		})
	}
	wg.Wait()
	for i, s := range specs {
		b := out[i]
		if b.err != nil {
			return nil, fmt.Errorf("driver: agent %q: %w", s.Name, b.err)
		}
		b.bind(b.a)
		b.a.records = d.records
		b.a.restoring = restoring
		if err := deps.Scheduler.Add(s.Name, b.a, s.Schedules); err != nil {
			return nil, fmt.Errorf("driver: %w", err)
		}
		d.agents[s.Name] = b.a
		d.order = append(d.order, s.Name)
	}
	return d, nil
}

// Agent returns the named agent.
func (d *Driver) Agent(name string) (*Agent, error) {
	d.mu.RLock()
	a, ok := d.agents[name]
	d.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownAgent, name)
	}
	return a, nil
}

// Agents returns the agents in config order.
func (d *Driver) Agents() []*Agent {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]*Agent, 0, len(d.order))
	for _, n := range d.order {
		out = append(out, d.agents[n])
	}
	return out
}

// Recovered tells every agent that the dependencies are back: turns held
// by the outage, and retries of turns it failed, run now instead of at the
// end of their backoff.
func (d *Driver) Recovered() {
	for _, a := range d.Agents() {
		a.recovered()
	}
}

// TurnLog returns the agents' turn summaries and message records in the
// store (package turnlog): what any replica reads to answer for any
// agent.
func (d *Driver) TurnLog() *turnlog.Log { return d.records }

// Events returns the bus the driver publishes on.
func (d *Driver) Events() *events.Bus { return d.deps.Events }

// Scheduler returns the scheduler firing the agents' schedules and timers.
func (d *Driver) Scheduler() *scheduler.Scheduler { return d.deps.Scheduler }

// SetInput gives every agent the durable input log (Deps.Input), for a
// log built after the driver (it needs the agents). Call it before Start.
func (d *Driver) SetInput(l Log) {
	d.deps.Input = l
	for _, a := range d.Agents() {
		a.input = l
	}
}

// Start starts the scheduler (restoring timers, counting missed ticks)
// and every agent's loop. ctx bounds the loops: cancelling it cancels
// running turns at once (prefer Shutdown for a graceful stop). It fails if
// the scheduler cannot read its state.
func (d *Driver) Start(ctx context.Context) error {
	if err := d.deps.Scheduler.Start(ctx); err != nil {
		return fmt.Errorf("driver: start scheduler: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.loops = ctx
	for _, n := range d.order {
		d.startLoop(d.agents[n])
	}
	return nil
}

// Shutdown stops the driver: no new turn starts; turns already running may
// finish until ctx ends, then they are cancelled with ErrShutdown.
// Shutdown returns when every loop has exited and the turn summaries
// queued for the store are written (or recordFlush has passed).
func (d *Driver) Shutdown(ctx context.Context) {
	defer d.flushRecords()
	d.once.Do(func() {
		d.deps.Scheduler.Stop()
		d.mu.Lock()
		d.loops = nil // an agent added from now on is not started (specs.go)
		d.mu.Unlock()
		for _, a := range d.Agents() {
			a.stop()
		}
		done := make(chan struct{})
		go func() { d.wg.Wait(); close(done) }()
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		for _, a := range d.Agents() {
			a.cancelRunning(ErrShutdown)
		}
		<-done
	})
}

// recordFlush bounds how long Shutdown waits for queued turn summaries.
const recordFlush = 5 * time.Second

// flushRecords waits for the queued turn summaries, within recordFlush.
func (d *Driver) flushRecords() {
	ctx, cancel := context.WithTimeout(context.Background(), recordFlush)
	defer cancel()
	if err := d.records.Flush(ctx); err != nil {
		d.deps.Log.Warn("turn summaries not all written before shutdown", "error", err)
	}
}
