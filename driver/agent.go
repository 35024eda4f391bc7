package driver

import (
	"context"
	"errors"
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
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/journal"
	"github.com/agent-worker/agent-worker/scheduler"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/tools"
	"github.com/agent-worker/agent-worker/turnlog"
)

// State is an agent's place in its life cycle.
type State string

// Agent states.
const (
	Sleeping State = "sleeping"
	Running  State = "running"
	Paused   State = "paused"
	Halted   State = "halted"
	Stopped  State = "stopped"
	// Waiting: work is queued but a dependency (the store, NATS) is down,
	// so no turn starts; it resumes by itself when the dependency is back.
	Waiting State = "waiting"
)

// States lists every state, for metrics that export one series per state.
var States = []State{Sleeping, Running, Paused, Halted, Stopped, Waiting}

// Agent is one agent's loop and its operator controls. All methods are
// safe for concurrent use.
type Agent struct {
	spec   Spec
	clock  clock.Clock
	log    *slog.Logger
	bus    *events.Bus
	guards []Guard
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
	paused      bool
	pause       PauseInfo // since, by and why, while paused
	halt        string    // non-empty: halted, with the reason
	stopping    bool
	stopped     bool
	restored    bool // persisted state loaded; the gate stays shut until then
	standby     bool // another replica owns this agent (lease); no turns here
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

	// releasing: Release closed the gate for a handover; SetOwned opens
	// it again. owner: the lease holder as last told (SetOwner).
	releasing bool
	owner     string

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
		standby: deps.Leased,
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
	var plugins []*plugin.Plugin
	if p := a.memoryPlugin(); p != nil {
		plugins = append(plugins, p) // first: every request gets the notes
	}
	plugins = append(plugins, a.steerPlugin()) // before the guards: a refused call's steers ride with the failed turn
	for _, g := range deps.Guards {
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
	a.runner, err = runner.New(runner.Config{
		AppName:           AppName,
		Agent:             llm,
		SessionService:    hist,
		AutoCreateSession: true,
		PluginConfig:      runner.PluginConfig{Plugins: plugins},
	})
	if err != nil {
		return nil, fmt.Errorf("build ADK runner: %w", err)
	}
	return a, nil
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

// Send queues m. A wake message wakes the agent (behind the gate); a
// deferred one waits for the next turn. Received is stamped when zero, and
// an ID made up when empty, so every message can be looked up.
func (a *Agent) Send(m inbox.Message) {
	m = a.stamped(m)
	a.inbox.Push(m)
	a.queued(m, false)
}

// ViaSubagent is inbox.Message.Via of a background subagent's report that
// arrived over NATS (the log maps the Agent-Worker-Via header
// natsinbox.ViaSubagent to it): the agent wakes with source subagent,
// named by the message's From (the subagent's id), as Report does for a
// report made in this process. Like any Via it only labels the wake.
const ViaSubagent = "subagent"

// onDrop is told of a message the inbox gave up (failed in too many
// turns; a memory-only message over the cap): one from the log is
// dead-lettered there, one only memory held gets a dead-letter record.
func (a *Agent) onDrop(m inbox.Message, reason string) {
	dead := a.giveUp(m, DropReason, reason)
	a.log.Warn("message dropped", "id", m.ID, "source", m.Source, "reason", reason, "dead_lettered", dead)
	a.emit(events.MessageDropped, map[string]any{"id": m.ID, "source": m.Source, "reason": reason, "dead_lettered": dead})
}

// Report queues a background subagent's report and wakes the agent with
// a subagent cause naming it.
func (a *Agent) Report(subagent string, m inbox.Message) {
	m.Kind = inbox.Wake
	m = a.stamped(m)
	a.inbox.Push(m)
	a.emit(events.MessageQueued, map[string]any{"id": m.ID, "kind": string(m.Kind), "source": m.Source})
	a.Wake(Cause{Source: SourceSubagent, Name: subagent, At: m.Received})
}

// Wake asks for a turn for cause c. Wakes coalesce: all causes waiting
// when a turn starts go into that turn. A paused or halted agent keeps the
// cause for the turn its release runs.
func (a *Agent) Wake(c Cause) { a.wake(c, nil) }

// WakeAs is an operator's Wake (source operator, with message as the
// turn's instruction when non-empty): its wake event carries who asked and
// why.
func (a *Agent) WakeAs(by Audit, message string) {
	a.wake(Cause{Source: SourceOperator, Instruction: message}, by.Fields())
}

// wake is Wake with extra data for the wake event.
func (a *Agent) wake(c Cause, extra map[string]any) {
	if c.At.IsZero() {
		c.At = a.clock.Now()
	}
	a.mu.Lock()
	if a.stopping {
		a.mu.Unlock()
		a.log.Info("wake ignored: agent is stopping", "source", c.Source)
		return
	}
	if len(a.causes) == 0 {
		a.firstWake = a.clock.Now()
	}
	a.causes = append(a.causes, c)
	if c.Source == SourceOperator {
		// An operator asking for a turn means now, not after the
		// backoff of an earlier failure.
		a.retryAt = time.Time{}
	}
	a.mu.Unlock()
	data := map[string]any{"source": string(c.Source), "name": c.Name}
	for k, v := range extra {
		data[k] = v
	}
	a.emit(events.Wake, data)
	a.poke()
}

// Pause closes the gate: the running turn (if any) finishes, no new turn
// starts, messages stay queued. Pausing a paused agent is a no-op.
func (a *Agent) Pause() { a.PauseAs(Audit{}) }

// PauseAs is Pause on behalf of by: the paused event carries by's caller
// and reason, and the stored pause keeps them with its time (PauseInfo),
// so status shows who paused the agent, since when and why — also after
// a restart or a change of owner. Pausing a paused agent changes nothing,
// not even who paused it, and reports false.
func (a *Agent) PauseAs(by Audit) bool {
	a.mu.Lock()
	was := a.paused
	if !was {
		a.paused = true
		a.pause = PauseInfo{Since: a.clock.Now(), By: by.By, Reason: by.Reason}
	}
	a.pauseSet = true
	a.mu.Unlock()
	if was {
		return false
	}
	a.syncPause()
	a.log.Info("paused", "by", by.By, "reason", by.Reason)
	a.emit(events.Paused, by.Fields())
	return true
}

// Resume opens the gate and runs one turn with everything queued, plus
// message (if non-empty) as an operator instruction. It is the only way
// out of a pause. An agent restored from the store that is neither paused
// nor halted is not resumed: the error wraps ErrNotPaused and names the
// agent's state, and no turn runs (Wake runs one). Before the restore
// (and on a replica standing by) the stored pause is not known here, and
// a resume is taken as before.
func (a *Agent) Resume(message string) error {
	_, err := a.ResumeAs(Audit{}, message, false)
	return err
}

// ResumeAs is Resume on behalf of by; its events (resumed, wake) carry
// by's caller and reason. With dropQueued it first abandons every message
// waiting in the inbox (wake and deferred): each is dropped with reason
// ReasonOperatorDropped — a message from the log is dead-lettered with
// that reason and the agent's cursors pass it — and a message-dropped
// event and a log line name it; none is dropped silently. It returns how
// many were dropped.
//
// Dropping and opening the gate are one step under the agent's lock, so
// the resumed turn sees none of the dropped messages and every message
// that arrives after it. Not dropped: the messages of a turn still running
// (they are not queued), and messages the inbox has not read from the
// log yet because it was at its cap; they are read after and run.
func (a *Agent) ResumeAs(by Audit, message string, dropQueued bool) (dropped int, err error) {
	a.mu.Lock()
	if a.stopping {
		a.mu.Unlock()
		return 0, ErrStopped
	}
	// Refused only where the pause is known: on a replica that restored
	// the agent from the store. Before that (or standing by) the stored
	// pause may be one this replica has not read, and the resume stands
	// over it as it always did.
	if a.restored && !a.paused && a.halt == "" {
		state := a.stateLocked()
		a.mu.Unlock()
		return 0, fmt.Errorf("agent %q is %w (state %s): nothing to resume; use wake to run a turn", a.spec.Name, ErrNotPaused, state)
	}
	var abandoned []inbox.Message
	if dropQueued {
		abandoned = a.inbox.Remove(func(inbox.Message) bool { return true })
	}
	// Opening the gate and queueing the resume's own wake happen under
	// one lock, so the turn the gate lets through includes the operator's
	// message.
	was := a.pause
	a.paused = false
	a.pause = PauseInfo{}
	a.pauseSet = true
	a.retryAt = time.Time{}
	a.causes = append(a.causes, Cause{Source: SourceOperator, At: a.clock.Now(), Instruction: message})
	a.mu.Unlock()
	for _, m := range abandoned {
		a.abandon(m, by)
	}
	a.log.Info("resumed", "by", by.By, "reason", by.Reason, "dropped_queued", len(abandoned))
	data := by.into(map[string]any{"message": message != ""})
	if dropQueued {
		data["dropped_queued"] = len(abandoned)
	}
	if !was.Since.IsZero() {
		data["paused_since"] = was.Since
		data["paused_by"] = was.By
	}
	a.emit(events.Resumed, data)
	a.emit(events.Wake, by.into(map[string]any{"source": string(SourceOperator)}))
	a.syncPause()
	a.poke()
	return len(abandoned), nil
}

// abandon drops a queued message an operator gave up: one from the log is
// dead-lettered there, and the log and a message-dropped event say so.
func (a *Agent) abandon(m inbox.Message, by Audit) {
	dead := a.giveUp(m, ReasonOperatorDropped, "an operator abandoned the queued message (resume with drop_queued)")
	a.log.Warn("message dropped", "id", m.ID, "source", m.Source, "reason", ReasonOperatorDropped, "by", by.By,
		"dead_lettered", dead)
	data := map[string]any{"id": m.ID, "source": m.Source, "reason": ReasonOperatorDropped, "dead_lettered": dead}
	if by.By != "" {
		data["by"] = by.By
	}
	if by.Reason != "" {
		data["operator_reason"] = by.Reason
	}
	a.emit(events.MessageDropped, data)
}

// Interrupt cancels the running turn (its messages go back to the inbox).
// With hold, it also pauses the agent; cancelling and closing the gate
// happen under one lock, so no turn can start in between. It reports
// whether a turn was running.
func (a *Agent) Interrupt(hold bool) bool { return a.InterruptAs(Audit{}, hold) }

// InterruptAs is Interrupt on behalf of by: the interrupted event (and
// the paused event of a hold) carry by's caller and reason, and a hold
// stores them with the pause as PauseAs does.
func (a *Agent) InterruptAs(by Audit, hold bool) bool {
	a.mu.Lock()
	wasRunning := a.running
	pausedNow := hold && !a.paused
	if hold {
		if pausedNow {
			a.pause = PauseInfo{Since: a.clock.Now(), By: by.By, Reason: by.Reason, Interrupt: true}
		}
		a.paused = true
		a.pauseSet = true
	}
	if a.cancelTurn != nil {
		a.cancelTurn(ErrInterrupted)
	}
	a.mu.Unlock()
	if hold {
		a.syncPause()
	}
	a.log.Info("interrupted", "hold", hold, "turn_running", wasRunning, "by", by.By, "reason", by.Reason)
	a.emit(events.Interrupted, by.into(map[string]any{"hold": hold, "turn_running": wasRunning}))
	if pausedNow {
		a.emit(events.Paused, by.into(map[string]any{"via": "interrupt"}))
	}
	return wasRunning
}

// PauseInfo returns the agent's pause — since when, by whom, why — and
// whether it is paused. A pause restored from the store carries what was
// stored with it.
func (a *Agent) PauseInfo() (PauseInfo, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.paused {
		return PauseInfo{}, false
	}
	return a.pause, true
}

// Queued lists the messages waiting in the agent's inbox, oldest first,
// without taking them: what a resume would run (or, with dropQueued,
// abandon). The messages of a running turn are not listed.
func (a *Agent) Queued() []QueuedMessage {
	now := a.clock.Now()
	var out []QueuedMessage
	// Remove with a match that keeps everything walks the queue under
	// the inbox's lock and changes nothing.
	a.inbox.Remove(func(m inbox.Message) bool {
		out = append(out, queuedOf(m, now))
		return false
	})
	if out == nil {
		out = []QueuedMessage{}
	}
	return out
}

// Halt closes the gate for reason (a guardrail trip) and cancels the
// running turn. Only ClearHalt reopens it.
func (a *Agent) Halt(reason string) {
	a.mu.Lock()
	a.halt = reason
	if a.cancelTurn != nil {
		a.cancelTurn(fmt.Errorf("%w: %s", ErrHalted, reason))
	}
	a.mu.Unlock()
	a.log.Warn("halted", "reason", reason)
	a.emit(events.Halted, map[string]any{"reason": reason})
}

// Note adds a remark from the worker to the agent's next prompt.
func (a *Agent) Note(text string) {
	a.mu.Lock()
	a.notes = append(a.notes, text)
	a.mu.Unlock()
}

// StopTurn cancels the running turn with cause (for example a per-turn
// cap), without closing the gate.
func (a *Agent) StopTurn(cause error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cancelTurn != nil {
		a.cancelTurn(cause)
	}
}

// ClearHalt reopens a halted agent's gate; if wake messages are waiting,
// a turn follows.
func (a *Agent) ClearHalt() {
	a.mu.Lock()
	a.halt = ""
	a.mu.Unlock()
	a.log.Info("halt cleared")
	if w, _ := a.inbox.Len(); w > 0 {
		a.Wake(Cause{Source: SourceOperator})
	}
	a.poke()
}

// stop closes the gate for good (Shutdown).
func (a *Agent) stop() {
	a.mu.Lock()
	if !a.stopping {
		close(a.done)
	}
	a.stopping = true
	running := a.running
	a.mu.Unlock()
	a.emit(events.Stopping, map[string]any{"turn_running": running})
	a.poke()
}

func (a *Agent) cancelRunning(cause error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cancelTurn != nil {
		a.cancelTurn(cause)
	}
}

// State returns the agent's current state.
func (a *Agent) State() State {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stateLocked()
}

func (a *Agent) stateLocked() State {
	switch {
	case a.stopped:
		return Stopped
	case a.running:
		return Running
	case a.halt != "":
		return Halted
	case a.paused:
		return Paused
	case a.waiting != "":
		return Waiting
	}
	return Sleeping
}

// loop waits for wakes and runs turns until the agent is stopped or ctx
// ends.
func (a *Agent) loop(ctx context.Context) {
	defer func() {
		a.mu.Lock()
		a.stopped = true
		a.mu.Unlock()
		a.log.Info("agent stopped")
	}()
	a.poke() // restore at once (if this replica owns the agent)
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.signal:
		}
		if a.needsRestore() {
			// Owned and not yet (or no longer) in step with the store:
			// load pause, trips and timer state before any turn.
			if !a.restoreWithRetry(ctx) {
				return
			}
		}
		for {
			a.storeSettled() // cursors that dead letters let pass
			a.fill(ctx)      // the log's news, into the inbox
			c, ok := a.admit(ctx)
			if !ok {
				break
			}
			a.turn(c)
			a.foldMemory(ctx) // between turns: one model call at most
		}
		a.foldMemory(ctx) // a retried or forced fold, no turn waiting
		a.mu.Lock()
		done := a.stopping
		a.mu.Unlock()
		if done {
			return
		}
	}
}

// admit decides under the lock whether a turn starts now. On yes, it takes
// the waiting causes and marks the agent running with a cancel function in
// place, so Interrupt/Halt reach the turn from this instant.
func (a *Agent) admit(ctx context.Context) (turnStart, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.causes) == 0 || a.staleLocked() {
		a.causes = nil
		a.consecutive = 0
		return turnStart{}, false
	}
	if a.stopping || a.paused || a.halt != "" || !a.restored || a.standby || a.releasing {
		return turnStart{}, false
	}
	if a.health != nil {
		if err := a.health.Unavailable(); err != nil {
			a.waitLocked(err)
			return turnStart{}, false
		}
	}
	a.endWaitLocked()
	now := a.clock.Now()
	if now.Before(a.retryAt) || now.Before(a.throttledTo) {
		return turnStart{}, false // a timer pokes the loop when they pass
	}
	if a.spec.Coalesce > 0 && a.consecutive == 0 {
		if due := a.firstWake.Add(a.spec.Coalesce); now.Before(due) {
			if !a.coalescing {
				a.coalescing = true
				a.clock.AfterFunc(due.Sub(now), func() {
					a.mu.Lock()
					a.coalescing = false
					a.mu.Unlock()
					a.poke()
				})
			}
			return turnStart{}, false
		}
	}
	if a.jr != nil && !a.jr.admitLocked(now) {
		return turnStart{}, false // an unfinished turn's messages are coming back
	}
	if a.idleLocked() {
		a.skipLocked()
		return turnStart{}, false
	}
	if ok, next := a.turnsLimit.take(now); !ok {
		a.throttleLocked(now, next, "turns_per_hour",
			fmt.Sprintf("the worker allows you %d turns an hour, so this turn waited until %s", a.spec.TurnsPerHour, next.UTC().Format(time.RFC3339)), a.spec.TurnsPerHour)
		return turnStart{}, false
	}
	for _, g := range a.guards {
		if err := g.Admit(ctx, a.spec.Name); err != nil {
			a.halt = err.Error()
			a.log.Warn("turn refused by guard; agent halted", "reason", err)
			a.emit(events.Halted, map[string]any{"reason": err.Error()})
			return turnStart{}, false
		}
	}
	turnCtx, cancel := context.WithCancelCause(ctx)
	t := turnStart{ctx: turnCtx, cancel: cancel, causes: a.causes, notes: a.notes, eager: a.eagerTimer}
	for _, c := range a.causes {
		if c.Source != SourceTimer {
			t.eager = false
		}
	}
	a.causes, a.notes = nil, nil
	a.running = true
	a.cancelTurn = cancel
	a.requested = nil
	a.retryAt, a.retryOutage = time.Time{}, false
	a.consecutive++
	if a.jr != nil {
		t.resume = a.jr.take()
	}
	if t.resume != nil && t.resume.Turn > a.turns {
		a.turns = t.resume.Turn // resumed after a restart: the same turn
	} else {
		a.turns++
	}
	t.n = a.turns
	return t, true
}

// staleLocked reports whether every waiting cause is an inbox message
// that is gone (settled as already handled, or given up): no turn is
// owed. Callers hold mu.
func (a *Agent) staleLocked() bool {
	for _, c := range a.causes {
		if !c.Source.message() {
			return false
		}
	}
	w, _ := a.inbox.Len()
	return w == 0
}

// host adapts an Agent to tools.Host.
type host struct{ a *Agent }

func (h host) Now() time.Time { return h.a.clock.Now() }

func (h host) RequestWake(at time.Time, reason string) {
	h.a.mu.Lock()
	h.a.requested = &wakeRequest{at: at, reason: reason}
	h.a.mu.Unlock()
}

// ActionID names the running turn's tool call call: the same when the
// turn is resumed from its journal (journal.ActionID).
func (h host) ActionID(call string) string {
	a := h.a
	turn, ok := uint64(0), false
	if a.jr != nil {
		turn, ok = a.jr.turn()
	}
	if !ok {
		a.mu.Lock()
		if a.current != nil {
			turn = a.current.n
		}
		a.mu.Unlock()
	}
	return journal.ActionID(a.spec.Name, turn, call)
}

func (h host) ReportDone(summary string, details map[string]any) {
	h.a.log.Info("task reported done", "summary", summary)
	h.a.emit(events.ReportDone, map[string]any{"summary": summary, "details": details})
}

// Fire takes a schedule tick or timer from the scheduler as a wake.
func (a *Agent) Fire(f scheduler.Fire) {
	c := Cause{Due: f.Due}
	switch f.Kind {
	case scheduler.KindSchedule:
		c.Source, c.Name, c.Instruction = SourceSchedule, f.Schedule, f.Prompt
	case scheduler.KindHeartbeat:
		c.Source = SourceHeartbeat
	default:
		c.Source = SourceTimer
	}
	a.Wake(c)
}

// Running reports whether a turn is running (scheduler.Target).
func (a *Agent) Running() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.running
}

// Gate says why no turn may start: "paused", "halted", "stopped", or "".
func (a *Agent) Gate() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.stopping:
		return "stopped"
	case a.standby, a.releasing:
		// Releasing: the next owner serves the timers and ticks (a tick's
		// replace overlap must not cancel the turn being let finish).
		return "standby"
	case a.halt != "":
		return "halted"
	case a.paused:
		return "paused"
	}
	return ""
}

// PendingFire reports whether a fire of the schedule waits for the next
// turn (scheduler.Target, for overlap: queue).
func (a *Agent) PendingFire(schedule string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.causes {
		if c.Source == SourceSchedule && c.Name == schedule {
			return true
		}
	}
	return false
}

// needsRestore reports whether the agent is owned here but its state has
// not been loaded since it was acquired.
func (a *Agent) needsRestore() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return !a.standby && !a.restored && !a.stopping
}

// Standby reports whether another replica holds (or this one no longer
// holds) the agent's lease, so no turn runs here.
func (a *Agent) Standby() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.standby
}

// ErrLeaseLost ends a turn whose agent this replica no longer holds the
// lease of: another replica took it over, or this one could not renew it
// in time (the store was out of reach) and let go so that another can.
var ErrLeaseLost = errors.New("lease lost: this replica no longer owns the agent")

// SetOwned says whether this replica holds the agent's lease. Gaining it
// reloads the agent's durable state (its cursors among it) before its
// next turn; losing it cancels the running turn and stops turns here —
// after a Release there is none to cancel — and forgets the messages read
// from the log: the next owner reads them from the cursors. Either way it
// ends a Release's closed gate.
func (a *Agent) SetOwned(owned bool) {
	a.mu.Lock()
	was := !a.standby
	a.releasing = false // a handover ended (false) or was called off (true)
	a.standby = !owned
	if owned && !was {
		a.restored = false
	}
	if owned != was {
		a.lg = logState{gen: a.lg.gen + 1}
	}
	if !owned && a.cancelTurn != nil {
		a.cancelTurn(ErrLeaseLost)
	}
	a.mu.Unlock()
	if !owned && was {
		a.letGo(a.inbox.Drain().Messages)
	}
	if owned != was {
		a.log.Info("agent ownership changed", "owned", owned)
		a.emit(events.Ownership, map[string]any{"owned": owned})
	}
	a.poke()
}

// Release prepares a handover of the agent to another replica without
// aborting anything: it closes the gate, so no new turn starts here (Gate
// says "standby", so the scheduler leaves timers and ticks to the next
// owner), and waits until no turn runs. The running turn, if any, is
// never cancelled by it: it finishes, is recorded and its messages are
// settled as usual. It returns nil once nothing runs; the gate then stays
// closed until SetOwned — false when the handover completes (nothing is
// cancelled, since nothing runs), true when it is called off. If ctx ends
// first, the gate opens again and ctx's error is returned.
//
// Not guaranteed: causes that wait while the gate is closed (a wake, a
// failed turn's retry) stay with this replica; messages do not (they
// stay in the log, and the next owner reads them from the cursors).
func (a *Agent) Release(ctx context.Context) error {
	a.mu.Lock()
	a.releasing = true
	a.mu.Unlock()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		a.mu.Lock()
		running := a.running
		a.mu.Unlock()
		if !running {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			a.mu.Lock()
			a.releasing = false
			a.mu.Unlock()
			a.poke()
			return ctx.Err()
		}
	}
}

// SetOwner records which replica holds the agent's lease (its holder
// name; "" none known), for Status.
func (a *Agent) SetOwner(holder string) {
	a.mu.Lock()
	a.owner = holder
	a.mu.Unlock()
}

// letGo gives up messages when this replica no longer owns the agent: the
// new owner reads the log's messages from the cursors, so keeping them
// here would run them twice; messages that exist only here are lost, and
// say so.
func (a *Agent) letGo(msgs []inbox.Message) {
	for _, m := range msgs {
		if !m.Pos.InLog() {
			a.onDrop(m, "this replica no longer owns the agent")
		}
	}
}

// waitLocked holds turns because a dependency is down: said once per
// outage (log, event), shown as state waiting, and checked again every few
// seconds in case the recovery notice is missed. Callers hold mu.
func (a *Agent) waitLocked(err error) {
	if a.waiting == "" {
		a.log.Warn("turn waits: a dependency is unavailable; no model call until it is back", "reason", err, "pending_wakes", len(a.causes))
		a.emit(events.Waiting, map[string]any{"reason": err.Error()})
	}
	a.waiting = err.Error()
	if !a.waitCheck {
		a.waitCheck = true
		a.clock.AfterFunc(waitRecheck, func() {
			a.mu.Lock()
			a.waitCheck = false
			a.mu.Unlock()
			a.poke()
		})
	}
}

// waitRecheck is how often a waiting agent looks at its dependencies
// again by itself (Driver.Recovered wakes it sooner).
const waitRecheck = 5 * time.Second

// endWaitLocked ends a wait for dependencies. Callers hold mu.
func (a *Agent) endWaitLocked() {
	if a.waiting == "" {
		return
	}
	a.log.Info("dependencies are back; turns run again", "was", a.waiting)
	a.emit(events.WaitingOver, map[string]any{"was": a.waiting})
	a.waiting = ""
}

// recovered ends the backoff of a retry that an outage caused, and looks
// at the gate again.
func (a *Agent) recovered() {
	a.mu.Lock()
	if a.retryOutage {
		a.retryAt, a.retryOutage = time.Time{}, false
	}
	a.mu.Unlock()
	a.poke()
}

// throttleLocked makes the next turn wait until next, says so in the log,
// an event and the next prompt, and pokes the loop then. turns is the
// limit that bit. Callers hold mu.
func (a *Agent) throttleLocked(now, next time.Time, reason, note string, turns int) {
	a.throttledTo, a.throttledBy = next, reason
	pause := next.Sub(now)
	a.log.Warn("turn throttled", "reason", reason, "turns", turns, "until", next, "pause", pause)
	a.emit(events.Throttled, map[string]any{"reason": reason, "turns": turns, "until": next, "pause_ms": pause.Milliseconds()})
	a.notes = append(a.notes, note)
	a.clock.AfterFunc(pause, a.poke)
}
