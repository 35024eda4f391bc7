package driver

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/adk/agent/llmagent"
	"google.golang.org/adk/plugin"
	"google.golang.org/adk/runner"
	"google.golang.org/adk/tool"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/history"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/scheduler"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/tools"
	"github.com/agent-worker/agent-worker/turnlog"
)

// Agent is one agent's loop and its operator controls. All methods are
// safe for concurrent use.
type Agent struct {
	spec   Spec
	clock  clock.Clock
	log    *slog.Logger
	bus    *events.Bus
	guards []hook.Guard
	inbox  *inbox.Inbox
	hist   *history.Service
	runner *runner.Runner
	store  store.Store
	sched  *scheduler.Scheduler
	health Health // nil: dependencies are assumed up

	signal chan struct{} // buffered 1: "look at causes"
	done   chan struct{} // closed by stop: the worker is shutting down

	mu          sync.Mutex
	causes      []Cause
	gate        gate      // what keeps turns from starting (gate.go)
	pause       PauseInfo // since, by and why, while paused
	stopped     bool
	leased      bool // ownership moves between replicas (Deps.Leased)
	pauseSet    bool // an operator paused or resumed since start: newer than the store
	persistMu   sync.Mutex
	running     bool
	cancelTurn  context.CancelCauseFunc
	notes       []string  // for the next prompt
	consecutive int       // turns since the agent was last idle
	firstWake   time.Time // when the oldest waiting cause arrived (coalescing)
	coalescing  bool      // a coalesce timer is armed
	throttledTo time.Time
	throttledBy string // why throttledTo is set: "max_per_wake", "turns_per_hour"
	turnsLimit  bucket
	failures    int       // failed turns in a row, for the retry backoff
	retryAt     time.Time // a failed turn's retry waits until then
	retryOutage bool      // the pending retry follows an outage: recovery ends its wait
	waiting     string    // why turns wait for a dependency; "" when they need not
	waitCheck   bool      // a re-check of the dependencies is armed
	fenceCheck  bool      // a re-check of a lease in doubt is armed (gate.go)
	eagerTimer  bool      // the armed timer is the model's, at the earliest it may be
	requested   *wakeRequest
	turns       uint64
	last        *TurnSummary
	// handled maps the ids of messages handled by the turns in the
	// history window to their turn, for Message.
	handled map[string]uint64
	// input is the durable input log (nil without one); lg the agent's
	// place in it (log.go).
	input Log
	lg    logState
	mem   memState   // the running memory (memory.go)
	model modelState // the operator's model switch (model.go)
	// asking: an operator's ask is being answered (ask.go).
	asking atomic.Bool
	// current is the running turn and the messages it took (Message);
	// records keeps turn summaries and dead-letter records (turnlog).
	current *runningTurn
	// steers are operator messages for the running turn's next model
	// call (steer.go).
	steers  []steer
	records *turnlog.Log
	// restoring holds the driver's restore lanes (restoreLanes); nil: none.
	restoring chan struct{}

	// owner: the lease holder as last told (SetOwner).
	owner string

	// jr keeps the turn journal (journal.go); nil without a store.
	jr *journaler
	// tracer starts the turn spans; span is the running turn's while it
	// is sampled, for the bus tap (trace.go).
	tracer trace.Tracer
	span   atomic.Pointer[trace.Span]
	// tools are the built-in tools; expiries the timers of the pending
	// approvals (approval.go), under mu.
	tools    []tool.Tool
	expiries map[string]clock.Timer
	// approvals serialises the writes of the agent's approvals book
	// (book, approval.go).
	approvals sync.Mutex
}

type wakeRequest struct {
	at     time.Time
	reason string
}

func newAgent(s Spec, deps Deps, hist *history.Service) (*Agent, error) {
	if s.MaxTurnsPerWake <= 0 {
		s.MaxTurnsPerWake = 10
	}
	if s.ApprovalTTL <= 0 {
		s.ApprovalTTL = DefaultApprovalTTL
	}
	if s.ResumeWithin <= 0 {
		s.ResumeWithin = DefaultResumeWithin
	}
	if s.ResumeWait <= 0 {
		s.ResumeWait = DefaultResumeWait
	}
	a := &Agent{
		spec:    s,
		clock:   deps.Clock,
		log:     deps.Log.With("agent", s.Name),
		bus:     deps.Events,
		guards:  deps.Guards,
		gate:    gate{standby: deps.Leased},
		leased:  deps.Leased,
		hist:    hist,
		store:   deps.Store,
		sched:   deps.Scheduler,
		health:  deps.Health,
		input:   deps.Input,
		tracer:  deps.Tracer,
		handled: map[string]uint64{},
		signal:  make(chan struct{}, 1),

		turnsLimit: newBucket(s.TurnsPerHour, s.TurnBurst),
		done:       make(chan struct{}),
	}
	a.inbox = inbox.New(s.InboxCap, a.onDrop)
	env := tools.Env{Agent: s.Name, Host: host{a}, Sleep: s.Sleep, Publisher: deps.Publisher, PublishAllow: s.Publish, SubjectPrefix: deps.SubjectPrefix, HTTPAllow: s.HTTPGet, HTTPAllowPrivate: s.HTTPGetAllowPrivate}
	if deps.Subagents != nil {
		env.Spawner = deps.Subagents.Spawner(s.Name)
	}
	ts, err := tools.Build(s.Tools, env)
	if err != nil {
		return nil, err
	}
	a.tools, a.expiries = ts, map[string]clock.Timer{}
	llm, err := llmagent.New(llmagent.Config{
		Name:        s.Name,
		Description: description(s.Name),
		Model:       s.Model,
		Instruction: s.Instruction,
		Tools:       ts,
		Toolsets:    s.Toolsets,
	})
	if err != nil {
		return nil, fmt.Errorf("build ADK agent: %w", err)
	}
	a.runner, err = runner.New(runner.Config{
		AppName:           AppName,
		Agent:             llm,
		SessionService:    hist,
		AutoCreateSession: true,
		PluginConfig:      runner.PluginConfig{Plugins: a.plugins(deps.Guards)},
	})
	if err != nil {
		return nil, fmt.Errorf("build ADK runner: %w", err)
	}
	return a, nil
}

// plugins attaches the guards to the agent and lists the runner's plugins
// in the order they run: the lease's, the memory's, the steers', the
// guards', the approvals' and the journal's (which it starts, with a
// store).
func (a *Agent) plugins(guards []hook.Guard) []*plugin.Plugin {
	s := a.spec
	plugins := []*plugin.Plugin{a.leasePlugin()} // first: a call under a moved lease goes nowhere
	if p := a.memoryPlugin(); p != nil {
		plugins = append(plugins, p) // first: every request gets the notes
	}
	plugins = append(plugins, a.steerPlugin()) // before the guards: a refused call's steers ride with the failed turn
	for _, g := range guards {
		g.Attach(s.Name, a)
		if p := g.Plugin(s.Name); p != nil {
			plugins = append(plugins, p)
		}
	}
	if p := a.approvalPlugin(); p != nil {
		plugins = append(plugins, p)
	}
	if a.store != nil {
		// Last: a response is recorded after the guards charged it, and a
		// replayed one skips their after-model callbacks (not charged
		// again).
		a.jr = newJournaler(a)
		plugins = append(plugins, a.jr.plugin())
	}
	return plugins
}

// Name returns the agent's name.
func (a *Agent) Name() string { return a.spec.Name }

func (a *Agent) emit(typ string, data map[string]any) {
	a.bus.Publish(events.Event{Time: a.clock.Now(), Agent: a.spec.Name, Type: typ, Data: data})
}

func (a *Agent) poke() {
	select {
	case a.signal <- struct{}{}:
	default:
	}
}
