// Package watchdog stops tool-call loops: it watches the tool calls of
// each turn through an ADK plugin, raises an alert when a pattern appears
// (the same call again and again, a cycle, one dominant call, a failure
// streak), and acts by mode — off, warn, feedback or enforce. It must not
// price anything; an enforce trip is recorded by the guard (Tripper), so it
// survives a restart like any guardrail.
//
// Operators and the model get different texts: logs and events describe
// the pattern and how to reset it; the model is told only what it is
// repeating, never about operator controls.
package watchdog

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"google.golang.org/adk/plugin"
	"google.golang.org/adk/tool"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/hook"
)

// Modes.
const (
	ModeOff      = "off"
	ModeWarn     = "warn"
	ModeFeedback = "feedback"
	ModeEnforce  = "enforce"
)

// EventAlert is published for every alert: signal, pattern, calls, mode,
// action.
const EventAlert = "watchdog-alert"

// Guardrail is the name of the watchdog's trip (and of its reset).
const Guardrail = "watchdog"

// Tripper records a trip durably and halts the agent; the guard is one.
type Tripper interface {
	Trip(agent, guardrail, reason string)
}

// Options configure a Watchdog.
type Options struct {
	Log     *slog.Logger
	Events  *events.Bus
	Clock   clock.Clock
	Tripper Tripper // required for enforce
}

// Watchdog watches every agent's tool calls. It implements hook.Guard.
type Watchdog struct {
	o      Options
	mu     sync.Mutex
	agents map[string]*watched
}

type watched struct {
	name  string
	mode  string
	ctl   hook.Control
	mu    sync.Mutex // tool calls of one turn may run in parallel
	det   *Detector
	turns turnRepeat
}

var _ hook.Guard = (*Watchdog)(nil)

// New returns a Watchdog; AddAgent each agent.
func New(o Options) *Watchdog {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	return &Watchdog{o: o, agents: map[string]*watched{}}
}

// AddAgent watches an agent in mode ("" is enforce) with detector config c.
func (w *Watchdog) AddAgent(agent, mode string, c Config) {
	if mode == "" {
		mode = ModeEnforce
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.agents[agent] = &watched{name: agent, mode: mode, det: NewDetector(c), turns: turnRepeat{limit: c.withDefaults().TurnRepeat}}
}

func (w *Watchdog) get(agent string) *watched {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.agents[agent]
}

// Attach implements hook.Guard.
func (w *Watchdog) Attach(agent string, ctl hook.Control) {
	if a := w.get(agent); a != nil {
		a.ctl = ctl
	}
}

// Restore implements hook.Guard; the watchdog keeps no state of its own
// across restarts (its trips are the guard's).
func (w *Watchdog) Restore(context.Context, string) error { return nil }

// Admit implements hook.Guard; a watchdog trip is refused by the guard.
func (w *Watchdog) Admit(context.Context, string) error { return nil }

// BeginTurn starts a fresh detector (its patterns are per turn) and a
// fresh record of the turn's calls for the watch across turns.
func (w *Watchdog) BeginTurn(agent string, t hook.TurnInfo) {
	if a := w.get(agent); a != nil {
		a.mu.Lock()
		a.det.Reset()
		a.turns.begin(t.Eager)
		a.mu.Unlock()
	}
}

// EndTurn compares the turn's calls with the turns before it: the same
// calls in watchdog.turn_repeat eager turns in a row is an alert (in
// enforce mode the agent is halted before its next turn).
func (w *Watchdog) EndTurn(agent string) {
	a := w.get(agent)
	if a == nil || a.mode == ModeOff {
		return
	}
	a.mu.Lock()
	alerts := a.turns.end()
	a.mu.Unlock()
	w.act(a, alerts)
}

// Reset clears the agent's detectors, also the watch across turns (an
// operator reset of the watchdog guardrail). Notes already queued for the
// model stay.
func (w *Watchdog) Reset(agent string) {
	if a := w.get(agent); a != nil {
		a.mu.Lock()
		a.det.Reset()
		a.turns.last, a.turns.streak = "", 0
		a.mu.Unlock()
	}
}

// Plugin implements hook.Guard; nil in mode off.
func (w *Watchdog) Plugin(agent string) *plugin.Plugin {
	a := w.get(agent)
	if a == nil || a.mode == ModeOff {
		return nil
	}
	p, _ := plugin.New(plugin.Config{
		Name: "watchdog",
		BeforeToolCallback: func(_ tool.Context, t tool.Tool, args map[string]any) (map[string]any, error) {
			a.mu.Lock()
			alerts := a.det.Call(Call{Tool: t.Name(), Args: args})
			a.turns.call(Call{Tool: t.Name(), Args: args})
			a.mu.Unlock()
			return w.act(a, alerts), nil
		},
		AfterToolCallback: func(_ tool.Context, _ tool.Tool, _, result map[string]any, err error) (map[string]any, error) {
			failed := err != nil || result["error"] != nil
			a.mu.Lock()
			alerts := a.det.Result(failed)
			a.mu.Unlock()
			w.act(a, alerts)
			return nil, nil
		},
	})
	return p
}

// act handles alerts by mode. In enforce mode a blocking alert halts the
// agent and the looping call is not run: the returned map is its result.
func (w *Watchdog) act(a *watched, alerts []Alert) map[string]any {
	var blocked map[string]any
	for _, al := range alerts {
		action := "logged"
		switch {
		case a.mode == ModeEnforce && al.Blocking:
			action = "halted"
		case a.mode == ModeFeedback || a.mode == ModeEnforce:
			action = "told the model"
		}
		w.o.Log.Warn("watchdog: "+al.Operator, "agent", a.name, "signal", al.Signal, "calls", al.Calls, "mode", a.mode, "action", action)
		if w.o.Events != nil {
			w.o.Events.Publish(events.Event{Time: w.o.Clock.Now(), Agent: a.name, Type: EventAlert, Data: map[string]any{
				"signal": al.Signal, "pattern": al.Pattern, "calls": al.Calls, "mode": a.mode, "action": action,
			}})
		}
		if a.ctl != nil && (a.mode == ModeFeedback || a.mode == ModeEnforce) {
			// In enforce mode too: after an operator reset, the next
			// prompt says what went wrong.
			a.ctl.Note(al.Model)
		}
		if action == "halted" {
			reason := fmt.Sprintf("watchdog: %s (reset the %q guardrail to let the agent run again)", al.Operator, Guardrail)
			if w.o.Tripper != nil {
				w.o.Tripper.Trip(a.name, Guardrail, reason)
			} else if a.ctl != nil {
				a.ctl.Halt(reason)
			}
			blocked = map[string]any{"error": "not run: " + al.Model}
		}
	}
	return blocked
}
