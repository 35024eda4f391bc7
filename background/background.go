// Package background runs agents' subagents: self-contained tasks an
// agent hands off with the spawn_subagent tool, run in the background
// while the agent sleeps, whose results land in the agent's inbox and wake
// it. It enforces the caps (how many at once, a budget and a timeout
// each), charges every subagent's spend to its parent's ceilings, and on
// shutdown stops them within a bounded drain time. It must not outlive
// that drain.
//
// Not guaranteed: a subagent's result is held in memory until its parent
// takes it; a worker that dies first loses it (the parent is told nothing,
// and may ask again).
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

	"google.golang.org/adk/agent"
	"google.golang.org/adk/agent/llmagent"
	"google.golang.org/adk/model"
	"google.golang.org/adk/plugin"
	"google.golang.org/adk/runner"
	"google.golang.org/adk/session"
	"google.golang.org/adk/tool"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/tools"
)

// Event types.
const (
	EventStarted  = "subagent-started"
	EventFinished = "subagent-finished" // Data: id, outcome
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
	errBudget   = errors.New("subagent budget spent")
)

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
	// Max is how many may run at once (default 3).
	Max int
	// BudgetUSD stops one subagent at this cost; 0 = none.
	BudgetUSD float64
	// Timeout stops one subagent that runs longer (default 10m).
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

// Options configure a Manager.
type Options struct {
	Clock   clock.Clock
	Log     *slog.Logger
	Events  *events.Bus
	Charger Charger
}

// Manager runs every agent's subagents.
type Manager struct {
	o       Options
	mu      sync.Mutex
	parents map[string]*family
	seq     int
	closing bool
	wg      sync.WaitGroup
}

type family struct {
	name    string
	parent  Parent
	spec    Spec
	running map[string]*sub
}

type sub struct {
	id     string
	task   string
	cancel context.CancelCauseFunc
	spent  float64
}

// New returns a Manager.
func New(o Options) *Manager {
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Manager{o: o, parents: map[string]*family{}}
}

// Add registers a parent agent and how its subagents run.
func (m *Manager) Add(name string, p Parent, s Spec) {
	if s.Max <= 0 {
		s.Max = 3
	}
	if s.Timeout <= 0 {
		s.Timeout = 10 * time.Minute
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.parents[name] = &family{name: name, parent: p, spec: s, running: map[string]*sub{}}
}

// Spawner returns the tools' handle for parent's subagents.
func (m *Manager) Spawner(parent string) tools.Spawner { return spawner{m, parent} }

type spawner struct {
	m      *Manager
	parent string
}

func (s spawner) Spawn(task string) (string, error) { return s.m.Spawn(s.parent, task) }
func (s spawner) Stop(id string) error              { return s.m.Stop(s.parent, id) }

// Running returns how many subagents of parent are running.
func (m *Manager) Running(parent string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f := m.parents[parent]; f != nil {
		return len(f.running)
	}
	return 0
}

// Spawn starts a subagent of parent on task.
func (m *Manager) Spawn(parent, task string) (string, error) {
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
	case len(f.running) >= f.spec.Max:
		m.mu.Unlock()
		return "", fmt.Errorf("%w: %d subagents are already running (the most this agent may run at once); wait for their reports", ErrLimit, f.spec.Max)
	}
	m.seq++
	id := parent + "-sub-" + strconv.Itoa(m.seq)
	ctx, cancel := context.WithCancelCause(context.Background())
	s := &sub{id: id, task: task, cancel: cancel}
	f.running[id] = s
	m.wg.Add(1)
	m.mu.Unlock()

	m.o.Log.Info("subagent started", "agent", parent, "subagent", id)
	m.emit(parent, EventStarted, map[string]any{"id": id})
	timer := m.o.Clock.AfterFunc(f.spec.Timeout, func() { cancel(context.DeadlineExceeded) })
	go func() {
		defer m.wg.Done()
		defer timer.Stop()
		text, err := m.run(ctx, f, s)
		m.finish(f, s, text, err, context.Cause(ctx))
	}()
	return id, nil
}

// Stop stops a running subagent of parent; its report says it was
// stopped.
func (m *Manager) Stop(parent, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.parents[parent]
	if f == nil || f.running[id] == nil {
		return fmt.Errorf("%w %q", ErrUnknown, id)
	}
	f.running[id].cancel(errStopped)
	return nil
}

var errStopped = errors.New("stopped by its parent")

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

// meter charges every completed response to the parent and stops the
// subagent at its budget or when the parent is halted.
func (m *Manager) meter(f *family, s *sub) *plugin.Plugin {
	p, _ := plugin.New(plugin.Config{
		Name: "subagent-meter",
		BeforeModelCallback: func(cctx agent.CallbackContext, _ *model.LLMRequest) (*model.LLMResponse, error) {
			if m.o.Charger != nil {
				if err := m.o.Charger.Admit(cctx, f.name); err != nil {
					return nil, err
				}
			}
			return nil, nil
		},
		AfterModelCallback: func(_ agent.CallbackContext, resp *model.LLMResponse, _ error) (*model.LLMResponse, error) {
			if resp == nil || resp.Partial || !f.spec.Priced {
				return nil, nil
			}
			cost := f.spec.Price.Cost(guard.UsageOf(resp.UsageMetadata, resp.CustomMetadata))
			if m.o.Charger != nil {
				m.o.Charger.Charge(f.name, cost)
			}
			m.mu.Lock()
			s.spent += cost
			over := f.spec.BudgetUSD > 0 && s.spent >= f.spec.BudgetUSD
			m.mu.Unlock()
			if over {
				s.cancel(errBudget)
				return nil, fmt.Errorf("%w: $%.4f of $%.4f", errBudget, s.spent, f.spec.BudgetUSD)
			}
			return nil, nil
		},
	})
	return p
}

// finish reports the subagent's result (or why there is none) to its
// parent, which wakes for it.
func (m *Manager) finish(f *family, s *sub, text string, err, cause error) {
	m.mu.Lock()
	delete(f.running, s.id)
	closing := m.closing
	spent := s.spent
	m.mu.Unlock()
	outcome := OutcomeCompleted
	switch {
	case errors.Is(cause, errStopped), errors.Is(cause, ErrShutdown):
		outcome = OutcomeStopped
	case errors.Is(cause, context.DeadlineExceeded):
		outcome = OutcomeTimeout
	case err != nil || cause != nil:
		outcome = OutcomeFailed
	}
	m.o.Log.Info("subagent finished", "agent", f.name, "subagent", s.id, "outcome", outcome, "cost_usd", spent, "error", err)
	m.emit(f.name, EventFinished, map[string]any{"id": s.id, "outcome": outcome, "cost_usd": spent})
	if closing {
		return // the parent is stopping too; nothing would take the report
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Subagent %s %s.\nTask: %s\n", s.id, outcome, s.task)
	switch {
	case outcome == OutcomeCompleted:
		fmt.Fprintf(&b, "Result:\n%s", text)
	case cause != nil:
		fmt.Fprintf(&b, "It stopped early: %v.", cause)
		if text != "" {
			fmt.Fprintf(&b, "\nLast words:\n%s", text)
		}
	case err != nil:
		fmt.Fprintf(&b, "It failed: %v.", err)
	}
	f.parent.Report(s.id, inbox.Message{ID: s.id, Source: "subagent:" + s.id, From: s.id, Text: b.String()})
}

func (m *Manager) emit(agent, typ string, data map[string]any) {
	if m.o.Events != nil {
		m.o.Events.Publish(events.Event{Time: m.o.Clock.Now(), Agent: agent, Type: typ, Data: data})
	}
}

// Shutdown stops accepting subagents, lets running ones finish until ctx
// ends, then stops them and waits for them to return.
func (m *Manager) Shutdown(ctx context.Context) {
	m.mu.Lock()
	m.closing = true
	m.mu.Unlock()
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	m.mu.Lock()
	for _, f := range m.parents {
		for _, s := range f.running {
			s.cancel(ErrShutdown)
		}
	}
	m.mu.Unlock()
	<-done
}
