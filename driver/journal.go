package driver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/adk/agent"
	"google.golang.org/adk/model"
	"google.golang.org/adk/plugin"
	"google.golang.org/adk/tool"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/journal"
	"github.com/agent-worker/agent-worker/outage"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/tools"
)

// Durable turns (package journal). While a turn runs, its journal holds
// its inputs and every model response and tool result so far, written as
// each completes (the journal plugin, the last of the agent's plugins, so
// the guards have charged a response before it is recorded). A turn that
// ends without completing — a crash, a lost lease, an outage, a failure —
// leaves its journal, and the agent's next turn resumes it: the same
// messages (by id) and the recorded prompt, recorded responses returned to
// ADK without calling the model (not charged again), recorded tool results
// without running the tool, then live from the first step with no record.
//
// A turn ended by an operator (interrupt), a guardrail (halt, cap) or its
// timeout abandons its journal: that work was stopped on purpose. So is a
// journal older than Spec.ResumeWithin, or whose durable messages are not
// all back in the inbox within Spec.ResumeWait of the agent's start; the
// messages then run in an ordinary turn.
//
// A single-step turn (the model answers without calling a tool) writes no
// journal: nothing but its record follows that response.

// Defaults for Spec.ResumeWithin and Spec.ResumeWait.
const (
	DefaultResumeWithin = time.Hour
	DefaultResumeWait   = 70 * time.Second
)

// journaler is one agent's side of its turn journal.
type journaler struct {
	a *Agent

	mu sync.Mutex
	// cur is the running turn's journal (nil between turns); its Steps
	// before live are replayed, model responses by their order, tool
	// results by call id.
	cur *journal.Journal
	// pending is an unfinished journal the next turn resumes, gathered
	// until gatherBy: its durable messages must be back in the inbox.
	pending  *journal.Journal
	gatherBy time.Time
	arming   bool // a timer pokes the agent at gatherBy
	// models counts the running turn's model calls that reached the
	// plugin; replayed the steps it took from the journal; replayedCalls
	// the tool calls answered from it (their AfterTool records nothing).
	models        int
	replayed      int
	replayedCalls map[string]bool
	off           bool // journaling stopped for this turn (too large)
	// batch is the running new turn's messages until its journal's first
	// write records their ids.
	batch []inbox.Message
	saved bool // cur is in the store
	// fence is the running turn's: the journal is written under it.
	fence turnFence
	// unsaved is the last failed write's error: the turn makes no further
	// model call until a write succeeds (a tool's effect is not built on
	// unless its record is durable).
	unsaved error
}

func newJournaler(a *Agent) *journaler { return &journaler{a: a} }

// restore loads an unfinished journal left by an earlier process (after
// restoreTurns: a journal of a committed turn is finished). It arms a wake
// so the resume runs even when no message brings the agent back.
func (j *journaler) restore(ctx context.Context) error {
	a := j.a
	jr, err := journal.Load(ctx, a.store, a.spec.Name)
	if err != nil {
		return err
	}
	a.mu.Lock()
	committed := a.turns
	a.mu.Unlock()
	if jr == nil || jr.Turn <= committed {
		return nil
	}
	now := a.clock.Now()
	if age := now.Sub(jr.Started); age > a.spec.ResumeWithin {
		j.abandon(jr, "expired")
		return nil
	}
	j.mu.Lock()
	j.pending, j.gatherBy = jr, now.Add(a.spec.ResumeWait)
	j.mu.Unlock()
	a.log.Info("unfinished turn found: the next turn resumes it", "journal_turn", jr.Turn, "steps", len(jr.Steps), "messages", len(jr.Messages))
	a.mu.Lock()
	if len(a.causes) == 0 {
		a.firstWake = now
	}
	a.causes = append(a.causes, Cause{Source: SourceRetry, At: now})
	a.mu.Unlock()
	a.poke()
	return nil
}

// admitLocked says whether the next turn may start: not while a pending
// journal's durable messages are still coming back (until gatherBy; then
// the journal is abandoned). Callers hold a.mu.
func (j *journaler) admitLocked(now time.Time) bool {
	j.mu.Lock()
	p := j.pending
	if p == nil {
		j.mu.Unlock()
		return true
	}
	missing := j.a.inbox.Missing(p.Durable)
	if len(missing) == 0 {
		j.mu.Unlock()
		return true
	}
	if now.Before(j.gatherBy) {
		if !j.arming {
			j.arming = true
			j.a.clock.AfterFunc(j.gatherBy.Sub(now), func() {
				j.mu.Lock()
				j.arming = false
				j.mu.Unlock()
				j.a.poke()
			})
		}
		j.mu.Unlock()
		return false
	}
	j.pending = nil
	j.mu.Unlock()
	j.a.log.Warn("unfinished turn abandoned: its messages did not come back in time", "journal_turn", p.Turn, "missing", len(missing), "waited", j.a.spec.ResumeWait)
	go j.abandon(p, "inputs_missing")
	return true
}

// hasPending reports whether an unfinished journal waits for the next
// turn to resume it.
func (j *journaler) hasPending() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.pending != nil
}

// take returns the pending journal for the turn about to start (nil: an
// ordinary turn).
func (j *journaler) take() *journal.Journal {
	j.mu.Lock()
	defer j.mu.Unlock()
	p := j.pending
	j.pending = nil
	return p
}

// begin starts the turn's journal: resumed (res not nil) or new.
func (j *journaler) begin(n uint64, start time.Time, wakes []string, batch inbox.Batch, prompt string, res *journal.Journal, fence turnFence) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.models, j.replayed, j.replayedCalls, j.off, j.unsaved, j.batch = 0, 0, nil, false, nil, nil
	j.fence = fence
	if res != nil {
		res.Resumes++
		j.cur, j.saved = res, true
		return
	}
	// The message ids are filled in at the first write (most turns never
	// write one: a single step needs no journal).
	j.cur, j.saved, j.batch = &journal.Journal{Turn: n, Started: start, Prompt: prompt, Wakes: wakes}, false, batch.Messages
}

// turn is the number that names the running turn's side effects: the
// number of the turn that began its journal.
func (j *journaler) turn() (uint64, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.cur == nil {
		return 0, false
	}
	return j.cur.Turn, true
}

// end settles the running turn's journal by its outcome, and returns how
// many steps the turn replayed.
func (j *journaler) end(outcome string, leaseLost bool) int {
	j.mu.Lock()
	cur, replayed := j.cur, j.replayed
	j.cur = nil
	keep := cur != nil && len(cur.Steps) > 0
	switch {
	case outcome == OutcomeCompleted, leaseLost:
		// Completed: the record names the turn, the journal is done (a
		// journal of a committed turn is never resumed). Lease lost: the
		// next owner resumes it from the store.
		keep = false
	case outcome == OutcomeInterrupted || outcome == OutcomeHalted || outcome == OutcomeTimeout || outcome == OutcomeCapped:
		j.mu.Unlock()
		if keep && j.saved {
			j.abandon(cur, outcome)
		}
		return replayed
	}
	if keep {
		// Failed, or a dependency went down, or shutting down: the next
		// turn (a retry, or the next process) picks up where it stopped.
		j.pending, j.gatherBy = cur, j.a.clock.Now()
	}
	j.mu.Unlock()
	return replayed
}

// abandon gives a journal up: deleted (by the owner only), announced.
func (j *journaler) abandon(jr *journal.Journal, reason string) {
	a := j.a
	if w, ok := a.writer(); ok {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := journal.Delete(ctx, w, a.spec.Name); err != nil {
			a.log.Warn("abandoned turn journal not deleted; it is recognised as finished or expired later", "error", err)
		}
		cancel()
	}
	a.log.Info("turn journal abandoned", "journal_turn", jr.Turn, "steps", len(jr.Steps), "reason", reason)
	a.emit(events.JournalAbandoned, map[string]any{"journal_turn": jr.Turn, "steps": len(jr.Steps), "reason": reason})
}

// saveLocked writes the running journal; callers hold j.mu. A journal
// that outgrew its bound stops being written for the rest of the turn (a
// crash then re-runs the turn, as without a journal); any other failure is
// returned marked as a store outage, and kept (unsaved) so the turn's next
// model call waits for a successful write: the turn fails as unavailable,
// and its retry resumes from the journal this process still holds.
func (j *journaler) saveLocked(ctx context.Context) error {
	err := j.writeLocked(ctx)
	j.unsaved = err
	return err
}

func (j *journaler) writeLocked(ctx context.Context) error {
	a := j.a
	for _, m := range j.batch {
		if m.ID == "" {
			continue
		}
		j.cur.Messages = append(j.cur.Messages, m.ID)
		if m.Pos.InLog() {
			j.cur.Durable = append(j.cur.Durable, m.ID)
		}
	}
	j.batch = nil
	if j.off {
		return nil
	}
	w, ok := j.fence.writer(a)
	if !ok {
		return nil // fenced: the turn is not recorded either (ErrLeaseLost)
	}
	err := journal.Save(context.WithoutCancel(ctx), w, a.spec.Name, j.cur)
	switch {
	case err == nil:
		j.saved = true
		return nil
	case errors.Is(err, store.ErrFenced):
		// The lease moved under the running turn: it stops (its next call
		// is refused) and records nothing.
		a.cancelRunning(ErrLeaseLost)
		return nil
	case errors.Is(err, journal.ErrTooLarge):
		j.off = true
		a.log.Warn("turn journal stopped for this turn: it outgrew its bound; a crash now re-runs the turn", "turn", j.cur.Turn, "error", err)
		a.emit(events.JournalAbandoned, map[string]any{"journal_turn": j.cur.Turn, "steps": len(j.cur.Steps), "reason": "too_large"})
		return nil
	}
	return outage.Mark("store", err)
}

// plugin records and replays the running turn's steps.
func (j *journaler) plugin() *plugin.Plugin {
	p, _ := plugin.New(plugin.Config{
		Name:                "journal",
		BeforeModelCallback: j.beforeModel,
		AfterModelCallback:  j.afterModel,
		BeforeToolCallback:  j.beforeTool,
		AfterToolCallback:   j.afterTool,
	})
	return p
}

// beforeModel saves what the last write left unsaved, and replays the
// model call's recorded response when the journal has one.
func (j *journaler) beforeModel(ctx agent.CallbackContext, _ *model.LLMRequest) (*model.LLMResponse, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.cur == nil {
		return nil, nil
	}
	if j.unsaved != nil {
		if err := j.saveLocked(ctx); err != nil {
			return nil, err
		}
	}
	k := j.models
	j.models++
	if r := j.cur.Model(k); r != nil {
		j.replayed++
		return r.LLMResponse(), nil
	}
	return nil, nil
}

// afterModel records a model response of a turn with more than one step.
func (j *journaler) afterModel(ctx agent.CallbackContext, resp *model.LLMResponse, err error) (*model.LLMResponse, error) {
	if err != nil || resp == nil || resp.Partial || resp.Content == nil {
		return nil, nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.cur == nil {
		return nil, nil
	}
	if len(j.cur.Steps) == 0 && !callsTools(resp) {
		return nil, nil // a single-step turn: nothing to resume
	}
	// The guards charged the response (they run before this
	// plugin); their charge is stored before the response is
	// recorded, so a replay — never charged — finds it paid once.
	if err := j.a.flushCharges(ctx); err != nil {
		j.unsaved = err
		return nil, err
	}
	j.cur.AddModel(resp)
	return nil, j.saveLocked(ctx)
}

// beforeTool replays the tool call's recorded result when the journal
// has one (but for the tools rerunOnResume runs again).
func (j *journaler) beforeTool(ctx tool.Context, t tool.Tool, _ map[string]any) (map[string]any, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.cur == nil {
		return nil, nil
	}
	if r, ok := j.cur.Result(ctx.FunctionCallID(), t.Name()); ok {
		j.replayed++
		if j.replayedCalls == nil {
			j.replayedCalls = map[string]bool{}
		}
		j.replayedCalls[ctx.FunctionCallID()] = true
		if rerunOnResume[t.Name()] {
			return nil, nil // its effect lived in the lost turn's memory
		}
		if r == nil {
			r = map[string]any{}
		}
		return r, nil
	}
	return nil, nil
}

// afterTool records a tool call's result (its error as one).
func (j *journaler) afterTool(ctx tool.Context, t tool.Tool, _, result map[string]any, err error) (map[string]any, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.cur == nil || j.replayedCalls[ctx.FunctionCallID()] {
		return nil, nil
	}
	if err != nil {
		result = map[string]any{"error": err.Error()}
	}
	j.cur.AddResult(ctx.FunctionCallID(), t.Name(), result)
	// A failed write is not the tool's error: the model gets the
	// result, and the next model call waits for the write.
	_ = j.saveLocked(ctx)
	return nil, nil
}

// rerunOnResume are the tools a resumed turn runs again instead of taking
// their recorded result: their only effect is on the running turn's
// memory (schedule_next_turn's wake request, applied when the turn ends),
// which the cut-short turn took with it.
var rerunOnResume = map[string]bool{tools.ScheduleNextTurn: true}

// flushCharges stores what the guards charged the agent so far.
func (a *Agent) flushCharges(ctx context.Context) error {
	for _, g := range a.guards {
		if f, ok := g.(hook.ChargeFlusher); ok {
			if err := f.FlushAgent(context.WithoutCancel(ctx), a.spec.Name); err != nil {
				return outage.Mark("store", fmt.Errorf("store the charge of a model response: %w", err))
			}
		}
	}
	return nil
}

// callsTools reports whether resp asks for a tool call.
func callsTools(resp *model.LLMResponse) bool {
	for _, p := range resp.Content.Parts {
		if p.FunctionCall != nil {
			return true
		}
	}
	return false
}
