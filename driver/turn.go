package driver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/adk/agent"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/history"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/internal/textclip"
	"github.com/agent-worker/agent-worker/journal"
	"github.com/agent-worker/agent-worker/outage"
	"github.com/agent-worker/agent-worker/store"
)

// Turn outcomes.
const (
	OutcomeCompleted   = "completed"
	OutcomeFailed      = "failed"
	OutcomeTimeout     = "timeout"
	OutcomeInterrupted = "interrupted"
	OutcomeHalted      = "halted"
	OutcomeShutdown    = "shutdown"
	OutcomeCapped      = "capped"
	// OutcomeUnavailable: a dependency (the store, NATS, the model
	// provider) was down. Not the messages' fault: it counts against none
	// of them, and the turn is retried when the dependency is back.
	OutcomeUnavailable = "unavailable"
	// OutcomeAbandoned: the agent's lease moved while the turn ran (this
	// replica let it go, or was frozen or starved while another took it):
	// nothing of the turn is recorded, and its messages are the log's to
	// give to the owner.
	OutcomeAbandoned = "abandoned"
)

// TurnSummary describes a finished turn.
type TurnSummary struct {
	N          uint64        `json:"n"`
	Started    time.Time     `json:"started"`
	Duration   time.Duration `json:"duration_ns"`
	Outcome    string        `json:"outcome"`
	Error      string        `json:"error,omitempty"`
	Wakes      []string      `json:"wakes"`
	Messages   int           `json:"messages"`
	ModelCalls int           `json:"model_calls"`
	ToolCalls  int           `json:"tool_calls"`
	TokensIn   int           `json:"tokens_in"`
	TokensOut  int           `json:"tokens_out"`
	// Text is everything the model said in the turn, in order.
	Text string `json:"text,omitempty"`
	// PromptBytes is the size of the rendered prompt for this turn (the
	// new input only, not the history).
	PromptBytes int `json:"prompt_bytes"`
	// CostUSD is what the turn's model calls cost, as the guard priced
	// them (0 unpriced, or without a guard that prices).
	CostUSD float64 `json:"cost_usd"`
	// Replayed counts the steps (model responses, tool results) the turn
	// took from an unfinished turn's journal instead of redoing them.
	Replayed int `json:"replayed,omitempty"`
	// tools are the turn's tool calls, for its turnlog summary.
	tools toolCalls
}

type turnStart struct {
	n      uint64
	eager  bool // see hook.TurnInfo.Eager
	ctx    context.Context
	cancel context.CancelCauseFunc
	causes []Cause
	notes  []string
	// resume is the unfinished turn journal this turn resumes, or nil.
	resume *journal.Journal
}

// activeTurn is one admitted turn as its phases hand it on, in the order
// they run: what it took, how it was framed, and what became of it.
type activeTurn struct {
	turnStart
	start time.Time
	batch inbox.Batch
	gen   uint64 // the ownership the batch was read under
	// fence is the lease's fence the turn began under: what it writes is
	// written under it, and it stops once the fence is no longer held.
	fence turnFence
	// log is the agent's logger with the turn's trace; span the turn's
	// span and tid its trace id, for the outcome's event.
	log  *slog.Logger
	span trace.Span
	tid  string
	// prompt is what the model is given; record what the history keeps
	// of it.
	prompt, record string
	sum            TurnSummary
	// ids name the turn's messages (and, when it completes, the steers
	// it was shown); eventIDs are the first MaxEventIDs of them.
	ids, eventIDs []string
	// seen are the steers the turn's model calls were shown, left those
	// that came after its last one.
	seen, left []steer
}

// turn runs one admitted turn and decides the next wake.
func (a *Agent) turn(ts turnStart) {
	t := a.takeBatch(ts)
	a.framePrompt(t)
	err := a.runPrompt(t)
	err = a.recordTurn(t, err)
	a.settleTurn(t, err)
	a.announceTurn(t, err)
}

// takeBatch takes the admitted turn's messages from the inbox: a resumed
// turn's own, else what the input budget allows.
func (a *Agent) takeBatch(ts turnStart) *activeTurn {
	t := &activeTurn{turnStart: ts, start: a.clock.Now()}
	t.fence.f, t.fence.ok = a.fence()
	// Taking the batch and naming it the running turn's are one step, so
	// a lookup (Message) finds every message in the inbox or the turn.
	a.mu.Lock()
	if t.resume != nil {
		t.batch = a.inbox.TakeIDs(t.resume.Messages)
	} else {
		t.batch = a.inbox.Take(a.spec.MaxInputBytes)
	}
	w, d := a.inbox.Len()
	t.batch.Waiting = w + d + a.lg.waiting
	a.current = &runningTurn{n: t.n, msgs: t.batch.Messages, fence: t.fence}
	t.gen = a.lg.gen // the ownership the batch was read under
	a.mu.Unlock()
	return t
}

// framePrompt frames the turn's causes, notes and batch as its prompt (a
// resumed turn runs its journal's), opens its span and journal, and says
// the turn started.
func (a *Agent) framePrompt(t *activeTurn) {
	batch := t.batch
	wakes, instructions, data := coalesce(t.causes)
	ctx, span, log := a.startTurnSpan(t.ctx, t.n, wakes, batch)
	t.ctx, t.span, t.log = ctx, span, log
	framed := inbox.Prompt{Wakes: wakes, Instructions: instructions, Notes: t.notes, Batch: batch, External: data}
	if t.resume != nil {
		t.prompt, t.record = t.resume.Prompt, t.resume.Prompt
		a.keepForNext(t.turnStart)
	} else {
		t.prompt = framed.Render()
		t.record = framed.RecordOf(t.prompt)
	}
	if a.jr != nil {
		a.jr.begin(t.n, t.start, wakes, batch, t.prompt, t.resume, t.fence)
	}
	t.sum = TurnSummary{N: t.n, Started: t.start, Wakes: wakes, Messages: len(batch.Messages), PromptBytes: len(t.prompt)}
	t.ids = make([]string, 0, len(batch.Messages))
	for _, m := range batch.Messages {
		if m.ID != "" {
			t.ids = append(t.ids, m.ID)
		}
	}
	t.eventIDs = messageIDs(batch.Messages) // the first MaxEventIDs

	if log.Enabled(t.ctx, slog.LevelInfo) {
		log.Info("turn started", "turn", t.n, "wakes", strings.Join(wakes, "; "), "messages", len(batch.Messages), "dropped", batch.Dropped, "ids", t.ids)
	}
	started := map[string]any{"turn": t.n, "wakes": wakes, "messages": len(batch.Messages), "ids": t.eventIDs}
	if at := earliest(t.causes); !at.IsZero() {
		// When the oldest cause arose: wake latency is measured from it.
		started["cause_at"] = at
	}
	a.emit(events.TurnStarted, started)
	if r := t.resume; r != nil {
		log.Info("turn resumes an unfinished turn", "turn", t.n, "journal_turn", r.Turn, "steps", len(r.Steps), "resumes", r.Resumes)
		a.emit(events.TurnResumed, map[string]any{"turn": t.n, "journal_turn": r.Turn, "steps": len(r.Steps), "resumes": r.Resumes})
	}
}

// runPrompt runs the turn's prompt through the ADK runner within the
// turn's timeout and guards, and ends the turn's work. It returns why the
// turn stopped (nil: it completed); the summary takes the guards' usage
// and cost, and the turn the steers it was shown.
func (a *Agent) runPrompt(t *activeTurn) error {
	var timer interface{ Stop() bool }
	if a.spec.TurnTimeout > 0 {
		timer = a.clock.AfterFunc(a.spec.TurnTimeout, func() { t.cancel(ErrTurnTimeout) })
	}
	for _, g := range a.guards {
		g.BeginTurn(a.spec.Name, hook.TurnInfo{N: t.n, Eager: t.eager})
	}
	err := a.execute(t.ctx, t.prompt, &t.sum)
	if timer != nil {
		timer.Stop()
	}
	if t.ctx.Err() != nil {
		// Whatever the runner returned, the turn ended because its
		// context did; say why (timeout, interrupt, halt, shutdown).
		err = context.Cause(t.ctx)
	}
	// The turn's work is over: a guard that halts the agent as the turn
	// ends (a loop seen across turns) closes the gate for the next turn
	// without undoing this one.
	t.cancel(nil)
	for _, g := range a.guards {
		g.EndTurn(a.spec.Name)
		if m, ok := g.(hook.Meter); ok {
			// The guard saw every completed response, including one it
			// stopped the turn on, which never reached execute.
			if calls, in, out := m.TurnUsage(a.spec.Name); calls > t.sum.ModelCalls {
				t.sum.ModelCalls, t.sum.TokensIn, t.sum.TokensOut = calls, in, out
			}
		}
		if c, ok := g.(hook.Pricer); ok {
			t.sum.CostUSD += c.TurnCost(a.spec.Name)
		}
	}
	t.sum.Duration = a.clock.Now().Sub(t.start)
	t.seen, t.left = a.endSteers()
	if err == nil && len(t.seen) > 0 {
		sids := steerIDs(t.seen)
		t.ids = append(t.ids, sids...)
		t.eventIDs = append(t.eventIDs, sids[:min(len(sids), MaxEventIDs-len(t.eventIDs))]...) // eventIDs holds at most MaxEventIDs
	}
	return err
}

// recordTurn stores a completed turn in the history with the agent's
// cursors past its messages, unless this replica no longer owns the
// agent. It returns the turn's error: err, a failed record's, or either
// marked as the lease's loss when the lease went as the turn ended.
func (a *Agent) recordTurn(t *activeTurn, err error) error {
	if err == nil && !a.holds(t.fence) {
		// Fenced: the lease went while the turn ran and the driver has not
		// heard yet. Its record would land in the new owner's history.
		err = fmt.Errorf("record turn: %w", ErrLeaseLost)
	}
	if err == nil {
		// The turn's own context is cancelled by now; recording the turn
		// must not be. The record carries the agent's cursors past the
		// turn's messages: one write, so the turn and the fact that its
		// messages are handled are stored together or not at all.
		a.mu.Lock()
		cursors, gen := a.nextCursorsLocked(), a.lg.gen
		a.mu.Unlock()
		rec := history.Turn{N: t.n, Messages: t.ids, Input: genai.NewContentFromText(t.record, genai.RoleUser), Cursors: cursors, Fence: t.fence.f}
		// Written under the fence the turn began under: the store refuses
		// it if the lease moved since, whatever this replica believes.
		if cerr := a.hist.Commit(context.WithoutCancel(t.ctx), AppName, a.spec.Name, a.spec.Name, rec); errors.Is(cerr, store.ErrFenced) {
			err = fmt.Errorf("record turn: %w (%w)", ErrLeaseLost, cerr)
		} else if cerr != nil {
			err = fmt.Errorf("record turn: %w", cerr)
		} else {
			a.remember(t.n, t.ids)
			a.mu.Lock()
			if gen == a.lg.gen {
				a.settledLocked(cursors)
			}
			a.mu.Unlock()
		}
	}
	if err != nil && !errors.Is(err, ErrLeaseLost) && a.Standby() {
		// The lease went while the turn was ending (its record failed
		// with the store that cost the lease): its messages are the next
		// owner's now, whatever else went wrong.
		err = fmt.Errorf("%w (%w)", ErrLeaseLost, err)
	}
	return err
}

// settleTurn fixes the turn's outcome, ends its journal and span, and
// settles its messages and causes (settleFailed, settleCompleted).
func (a *Agent) settleTurn(t *activeTurn, err error) {
	t.sum.Outcome = outcome(err)
	if a.jr != nil {
		t.sum.Replayed = a.jr.end(t.sum.Outcome, errors.Is(err, ErrLeaseLost))
	}
	t.tid = traceID(t.span)
	a.endTurnSpan(t.span, t.sum, err)
	if err != nil {
		a.settleFailed(t, err)
	} else {
		a.settleCompleted(t)
	}
}

// settleFailed gives a failed turn's messages back to the inbox, to the
// log (the lease moved) or up (a cut turn), and decides its retry.
func (a *Agent) settleFailed(t *activeTurn, err error) {
	batch := t.batch
	t.sum.Error = err.Error()
	a.hist.Discard(AppName, a.spec.Name, a.spec.Name)
	attempts := 0 // interrupted, halted, shut down, a dependency down: not the messages' fault
	if blamed(t.sum.Outcome) {
		attempts = MaxAttempts
	}
	a.mu.Lock()
	moved := a.lg.gen != t.gen
	a.mu.Unlock()
	// Steered messages ride along with the turn's other tasks.
	t.causes = append(t.causes, steerCauses(append(t.seen, t.left...))...)
	cut := isCut(t.sum)
	requeued := 0
	switch {
	case errors.Is(err, ErrLeaseLost) || moved:
		// The messages are the log's to give again: to the next owner,
		// or — the lease lost and taken back while the turn ran — to
		// this one, which reads on from its cursors. Requeued as well,
		// they would be read twice.
		a.letGo(batch.Messages)
	case cut:
		a.cutMessages(batch.Messages, err)
	default:
		a.inbox.Requeue(batch, attempts)
		requeued = len(batch.Messages)
	}
	a.endCurrent()
	if t.sum.Outcome == OutcomeUnavailable && a.health != nil {
		a.health.Failed(err)
	}
	retryIn := a.afterFailure(t.causes, t.sum.Outcome, cut)
	if cut {
		a.tellCut(t.causes, len(batch.Messages), err)
	}
	if t.sum.Outcome == OutcomeAbandoned {
		// Not a failure of the turn's: its lease moved. Nothing of it was
		// recorded; its messages stay in the log for the owner.
		t.log.Warn("turn abandoned: lease moved", "turn", t.n, "error", err, "duration", t.sum.Duration, "messages", len(batch.Messages), "ids", t.ids)
		return
	}
	t.log.Warn("turn failed", "turn", t.n, "outcome", t.sum.Outcome, "error", err, "duration", t.sum.Duration, "messages_requeued", requeued, "retry_in", retryIn)
}

// settleCompleted ends a completed turn: its messages are handled, its
// notices delivered, and steers that came after its last model call wake
// the next turn.
func (a *Agent) settleCompleted(t *activeTurn) {
	sum := t.sum
	a.endCurrent()
	a.deliveredNotices(context.WithoutCancel(t.ctx), t.causes)
	t.log.LogAttrs(t.ctx, slog.LevelInfo, "turn completed", slog.Uint64("turn", t.n), slog.Duration("duration", sum.Duration), slog.Int("model_calls", sum.ModelCalls), slog.Int("tool_calls", sum.ToolCalls), slog.Int("tokens_in", sum.TokensIn), slog.Int("tokens_out", sum.TokensOut), slog.Int("messages", sum.Messages), slog.Any("ids", t.ids), slog.String("text", textclip.Runes(sum.Text, 400, "…")))
	for _, c := range steerCauses(t.left) {
		// Steered after the turn's last model call: the next turn's.
		a.wake(c, map[string]any{"steer": true})
	}
}

// announceTurn keeps the turn's summary, then sets the next wake and
// announces the turn's outcome (finish).
func (a *Agent) announceTurn(t *activeTurn, err error) {
	sum, batch, eventIDs, tid := t.sum, t.batch, t.eventIDs, t.tid
	var done func() // announces the outcome once the next wake is set
	if err != nil {
		done = func() {
			a.emit(events.TurnFailed, withTrace(map[string]any{"turn": t.n, "outcome": sum.Outcome, "error": sum.Error, "duration_ms": sum.Duration.Milliseconds(),
				"messages": len(batch.Messages), "ids": eventIDs}, tid))
		}
	} else {
		done = func() {
			a.emit(events.TurnCompleted, withTrace(map[string]any{"turn": t.n, "duration_ms": sum.Duration.Milliseconds(), "text": textclip.Runes(sum.Text, 2000, "…"), "tokens_in": sum.TokensIn, "tokens_out": sum.TokensOut, "model_calls": sum.ModelCalls, "tool_calls": sum.ToolCalls, "messages": sum.Messages, "ids": eventIDs, "cost_usd": sum.CostUSD}, tid))
			a.announceHandled(t.n, batch.Messages)
		}
	}
	if a.records != nil {
		// Written in the background by the owner only (owns is asked
		// again at the write): neither this turn nor the next waits on it.
		a.records.Record(a.spec.Name, summary(sum, batch.Messages), func() (store.Writer, bool) { return t.fence.writer(a) })
	}
	a.finish(sum, done)
}

// keepForNext hands a resuming turn's new causes and notes back for the
// turn after it: the resumed turn runs its recorded prompt, which has
// none of what arrived since its journal began.
func (a *Agent) keepForNext(t turnStart) {
	var fresh []Cause
	for _, c := range t.causes {
		if !c.Source.message() && c.Source != SourceRetry && c.At.After(t.resume.Started) {
			fresh = append(fresh, c)
		}
	}
	if len(fresh) == 0 && len(t.notes) == 0 {
		return
	}
	a.mu.Lock()
	if len(a.causes) == 0 && len(fresh) > 0 {
		a.firstWake = a.clock.Now()
	}
	a.causes = append(fresh, a.causes...)
	a.notes = append(t.notes, a.notes...)
	a.mu.Unlock()
}

// execute runs the ADK runner for one prompt and fills in the summary.
func (a *Agent) execute(ctx context.Context, prompt string, sum *TurnSummary) error {
	msg := genai.NewContentFromText(prompt, genai.RoleUser)
	for ev, err := range a.runner.Run(ctx, a.spec.Name, a.spec.Name, msg, agent.RunConfig{}) {
		if err != nil {
			return err
		}
		if ev == nil || ev.Partial || ev.Content == nil {
			continue
		}
		if ev.Author == a.spec.Name {
			if u := ev.UsageMetadata; u != nil {
				sum.ModelCalls++
				sum.TokensIn += int(u.PromptTokenCount)
				sum.TokensOut += int(u.CandidatesTokenCount)
			} else if ev.Content.Role == genai.RoleModel {
				sum.ModelCalls++
			}
		}
		var text strings.Builder
		for _, p := range ev.Content.Parts {
			switch {
			case p.FunctionCall != nil:
				sum.ToolCalls++
				sum.tools.call(p.FunctionCall)
			case p.FunctionResponse != nil:
				sum.tools.response(p.FunctionResponse)
			case p.Text != "" && !p.Thought && ev.Content.Role == genai.RoleModel:
				text.WriteString(p.Text)
			}
		}
		if text.Len() > 0 {
			// Everything the model said this turn, not only its last
			// words: a summary often precedes the final tool call.
			if sum.Text != "" {
				sum.Text += "\n"
			}
			sum.Text += text.String()
		}
	}
	return ctx.Err()
}

func outcome(err error) string {
	switch {
	case err == nil:
		return OutcomeCompleted
	case errors.Is(err, ErrTurnTimeout):
		return OutcomeTimeout
	case errors.Is(err, ErrInterrupted):
		return OutcomeInterrupted
	case errors.Is(err, hook.ErrHalted):
		return OutcomeHalted
	case errors.Is(err, ErrLeaseLost):
		return OutcomeAbandoned
	case errors.Is(err, ErrShutdown):
		return OutcomeShutdown
	case errors.Is(err, hook.ErrCapped):
		return OutcomeCapped
	case outage.Is(err):
		return OutcomeUnavailable
	}
	return OutcomeFailed
}

// blamed reports whether a turn that ended with outcome counts against
// the messages and tasks in it: it failed by itself (a bad answer, a
// timeout, a cap), not because of an operator, a guardrail, a shutdown or
// an outage.
func blamed(outcome string) bool {
	return outcome == OutcomeFailed || outcome == OutcomeTimeout || outcome == OutcomeCapped
}

// afterFailure decides what becomes of a failed turn's causes and arms
// its retry; a cut turn's (isCut) are given up instead (afterCut).
// Tasks (schedule prompts, operator messages, timers) are kept for the
// next turn — a failure blamed on the turn counts against each,
// and one that failed MaxAttempts turns is given up, said and announced.
// A turn that failed or met an outage is retried by itself after
// Spec.Retry's backoff when anything is left to do; an interrupted or
// halted one keeps its tasks for the turn that reopening the gate runs,
// or drops them if the gate stayed open (the operator stopped that work;
// its messages stay queued). It returns the retry's delay (0: none).
func (a *Agent) afterFailure(causes []Cause, outcome string, cut bool) time.Duration {
	if outcome == OutcomeShutdown || outcome == OutcomeAbandoned {
		return 0 // the process is going, or another replica owns the agent
	}
	if cut {
		return a.afterCut(causes)
	}
	var kept []Cause
	for _, c := range causes {
		if c.Source.message() || c.Source == SourceRetry {
			continue // the requeued messages carry these; a retry is added below
		}
		if blamed(outcome) {
			c.Attempts++
			if c.Attempts >= MaxAttempts {
				a.log.Warn("wake given up: its task failed in too many turns", "source", c.Source, "name", c.Name, "attempts", c.Attempts)
				a.emit(events.WakeDropped, map[string]any{"source": string(c.Source), "name": c.Name, "reason": "failed in too many turns"})
				continue
			}
		}
		kept = append(kept, c)
	}
	wakeMsgs, _ := a.inbox.Len()
	now := a.clock.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if outcome == OutcomeInterrupted || outcome == OutcomeHalted {
		if a.gate.paused || a.gate.halt != "" {
			a.causes = append(kept, a.causes...)
		} else if outcome == OutcomeHalted && (len(kept) > 0 || wakeMsgs > 0) {
			// The halt was lifted (a guardrail reset) before the halted
			// turn ended: the reopening found nothing queued to run, so
			// the turn's work runs now, as it would have after it.
			if len(a.causes) == 0 {
				a.firstWake = now
			}
			a.causes = append(kept, a.causes...)
			if len(a.causes) == 0 {
				a.causes = []Cause{{Source: SourceOperator, At: now}}
			}
		} else if len(kept) > 0 {
			a.log.Info("interrupted turn's wake dropped: the operator stopped it and left the gate open", "causes", len(kept))
		}
		return 0
	}
	if len(kept) == 0 && wakeMsgs == 0 {
		return 0 // nothing left to retry: every message was given up
	}
	a.failures++
	delay := a.spec.Retry.Delay(a.failures)
	a.retryAt, a.retryOutage = now.Add(delay), outcome == OutcomeUnavailable
	a.causes = append(append(kept, Cause{Source: SourceRetry, At: now}), a.causes...)
	if len(a.causes) == len(kept)+1 {
		a.firstWake = now
	}
	reason := "failure"
	if a.retryOutage {
		reason = "outage"
	}
	a.emit(events.RetryScheduled, map[string]any{"at": a.retryAt, "delay_ms": delay.Milliseconds(), "failures": a.failures, "reason": reason})
	a.clock.AfterFunc(delay, a.poke)
	return delay
}

// finish records the turn and decides what wakes the agent next: its own
// request (already clamped by the tool), else an earlier request still
// pending, else the heartbeat; and whether waiting causes run now or after
// a throttle pause. Timers live in the scheduler, which stores them. The
// turn's outcome is announced (done) after the next wake is set and before
// the agent may start another turn, so observers see a consistent agent.
func (a *Agent) finish(sum TurnSummary, done func()) {
	a.mu.Lock()
	req := a.requested
	a.requested = nil
	a.mu.Unlock()
	now := a.clock.Now()
	a.mu.Lock()
	a.eagerTimer = req != nil && !req.at.After(now.Add(a.spec.Sleep.Min))
	a.mu.Unlock()
	switch {
	case req != nil:
		a.sched.SetTimer(a.spec.Name, req.at, false)
		a.emit(events.WakeScheduled, map[string]any{"at": req.at, "reason": req.reason})
		a.log.Info("next wake requested", "at", req.at, "reason", req.reason)
	case a.hasRequestedTimer():
		// An earlier request still stands.
	case a.spec.Heartbeat > 0:
		a.sched.SetTimer(a.spec.Name, now.Add(a.spec.Heartbeat), true)
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	a.last = &sum
	if sum.Outcome == OutcomeCompleted {
		a.failures = 0
	}
	if w, _ := a.inbox.Len(); w > 0 && len(a.causes) == 0 && sum.Outcome == OutcomeCompleted {
		// The turn took what its input budget allowed; the wake messages
		// left over run next.
		a.causes = append(a.causes, Cause{Source: SourceInbox, At: now})
		a.firstWake = now
	}
	done()
	a.running = false
	a.cancelTurn = nil
	if len(a.causes) > 0 && a.consecutive >= a.spec.MaxTurnsPerWake && now.After(a.retryAt) {
		pause := max(a.spec.Sleep.Min, time.Second)
		a.consecutive = 0
		a.throttleLocked(now, now.Add(pause), "max_per_wake",
			fmt.Sprintf("you ran %d turns back to back, so the worker paused %s before this one", a.spec.MaxTurnsPerWake, pause), a.spec.MaxTurnsPerWake)
	}
}

// hasRequestedTimer reports whether a model-requested wake is pending.
func (a *Agent) hasRequestedTimer() bool {
	_, heartbeat, ok := a.sched.NextTimer(a.spec.Name)
	return ok && !heartbeat
}

// earliest returns when the oldest cause arose: its due time for
// schedules and timers, else when it arrived.
func earliest(cs []Cause) time.Time {
	var at time.Time
	for _, c := range cs {
		t := c.At
		if !c.Due.IsZero() {
			t = c.Due
		}
		if at.IsZero() || t.Before(at) {
			at = t
		}
	}
	return at
}
