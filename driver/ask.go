package driver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/internal/textclip"
)

// An ask is an operator's side question to an agent ("why did you page
// me?"), answered synchronously by one model call on what the agent's
// turns see — its instruction, its running memory and its history window
// — plus the question. It is not a turn: it takes no turn lock, waits for
// no turn and disturbs none, and adds nothing to the history, the memory,
// the inbox or the turn journal. It is admitted and charged by the guards
// like a turn's calls (see Ask).

// DefaultAskTimeout bounds an ask whose caller sets no earlier deadline
// (the control verb's default, control.Options.AskTimeout).
const DefaultAskTimeout = 60 * time.Second

// MaxQuestionBytes bounds an ask's question.
const MaxQuestionBytes = 4096

// Ask outcomes: the asked event's outcome, and the outcome label of
// agent_worker_asks_total.
const (
	AskAnswered  = "answered"
	AskRefused   = "refused"   // halted, a ceiling, another ask running, stopped
	AskFailed    = "failed"    // the model call (or reading the history) failed
	AskTimeout   = "timeout"   // no answer before the deadline
	AskCancelled = "cancelled" // the caller went away, or the worker is shutting down
)

// Errors of an ask, besides hook.ErrHalted, ErrStopped, ErrNotOwner and a
// guard's refusal (which Ask wraps).
var (
	ErrNoQuestion   = errors.New("the question is empty")
	ErrLongQuestion = fmt.Errorf("the question is longer than %d bytes", MaxQuestionBytes)
	ErrAskBusy      = errors.New("another ask of this agent is being answered; ask again when it is")
	ErrAskTimeout   = errors.New("the ask was not answered in time")
)

// Answer is an ask's answer.
type Answer struct {
	Agent string `json:"agent"`
	// Text is what the model said, its text parts in order.
	Text string `json:"answer"`
	// Model is the model that answered: the agent's, or the fallback
	// that took the call.
	Model     string  `json:"model"`
	TokensIn  int     `json:"tokens_in"`
	TokensOut int     `json:"tokens_out"`
	CostUSD   float64 `json:"cost_usd"`
	// HistoryTurns is how many turns of the history window the model saw.
	HistoryTurns int `json:"history_turns"`
	// NotRun names the tools the model asked to call in its answer: none
	// was run.
	NotRun     []string `json:"calls_not_run,omitempty"`
	DurationMS int64    `json:"duration_ms"`
}

// Ask answers question, from the operator by, with one model call on the
// agent's instruction, its running memory (when enabled) and the turns of
// its history window as its turns see them, plus the question framed as
// the operator's (trusted, not external data). The call declares no tool
// the model could use (tools the history used are declared with
// function calling off, as some providers require), and a function call
// in the answer is never run: NotRun names it.
//
// Guarantees:
//   - Nothing is written: not the history (its window is read as a
//     snapshot: a running turn's commit neither shows in it nor waits for
//     it), not the memory, not the inbox, not the turn journal. The
//     running turn, if any, goes on undisturbed; the answer is told that
//     it runs.
//   - Allowed while the agent sleeps, is paused or runs a turn. Refused
//     (outcome refused) when the agent is halted (hook.ErrHalted), stopped
//     (ErrStopped), already answering an ask (ErrAskBusy: one at a time,
//     so ceilings are checked against spend that includes the previous
//     one), or when a guard refuses the call before it is made (its
//     error wrapped: guard.CeilingError names the guardrail). Refused
//     with ErrNotOwner, and not counted, on a replica that does not run
//     the agent.
//   - The call's response is charged through every guard that takes side
//     calls (guard.Guard.ChargeSideCall): to the agent's session and
//     daily spend, never to a running turn's, and metered as any model
//     call; a crossed ceiling trips and halts the agent as after any call.
//   - Bounded by ctx (give it a deadline: DefaultAskTimeout) and by
//     Shutdown; a deadline is ErrAskTimeout (outcome timeout).
//   - Audited and counted: the log and an asked event name by, the
//     outcome, the model, tokens and cost. A question that is empty or
//     longer than MaxQuestionBytes is refused at once (ErrNoQuestion,
//     ErrLongQuestion) and not counted.
func (a *Agent) Ask(ctx context.Context, by hook.Audit, question string) (Answer, error) {
	question = strings.TrimSpace(question)
	switch {
	case question == "":
		return Answer{}, ErrNoQuestion
	case len(question) > MaxQuestionBytes:
		return Answer{}, ErrLongQuestion
	}
	start := a.clock.Now()
	ans, outcome, err := a.ask(ctx, by, question)
	if errors.Is(err, ErrNotOwner) {
		return ans, err
	}
	ans.Agent = a.spec.Name
	ans.DurationMS = a.clock.Now().Sub(start).Milliseconds()
	a.asked(by, question, ans, outcome, err)
	return ans, err
}

// ask gates the ask and runs its call; it returns the outcome.
func (a *Agent) ask(ctx context.Context, by hook.Audit, question string) (Answer, string, error) {
	a.mu.Lock()
	stopping, owned, halt := a.gate.stopping, !a.gate.standby && a.gate.restored, a.gate.halt
	st := a.askStateLocked()
	a.mu.Unlock()
	switch {
	case stopping:
		return Answer{}, AskRefused, ErrStopped
	case !owned:
		return Answer{}, AskRefused, fmt.Errorf("ask agent %q: %w (or it is still loading its state)", a.spec.Name, ErrNotOwner)
	case halt != "":
		return Answer{}, AskRefused, fmt.Errorf("%w (%s): it answers no ask until the guardrail is reset", hook.ErrHalted, halt)
	}
	if !a.asking.CompareAndSwap(false, true) {
		return Answer{}, AskRefused, ErrAskBusy
	}
	defer a.asking.Store(false)

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-a.done: // shutting down: an ask is never worth waiting for
			cancel(ErrShutdown)
		case <-ctx.Done():
		}
	}()
	ans, refused, err := a.askCall(ctx, askPrompt(by.By, question, st))
	switch {
	case err == nil:
		return ans, AskAnswered, nil
	case refused:
		return ans, AskRefused, fmt.Errorf("ask refused: %w", err)
	case errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		return ans, AskTimeout, fmt.Errorf("%w (%w)", ErrAskTimeout, err)
	case ctx.Err() != nil:
		return ans, AskCancelled, fmt.Errorf("ask cancelled: %w", context.Cause(ctx))
	}
	return ans, AskFailed, fmt.Errorf("ask agent %q: %w", a.spec.Name, err)
}

// askStateLocked says what the agent is doing, for the ask's prompt.
// Callers hold mu.
func (a *Agent) askStateLocked() string {
	switch {
	case a.running && a.current != nil:
		return fmt.Sprintf("your turn %d is running now; what it has done so far is not shown above", a.current.n)
	case a.gate.paused:
		s := "you are paused by an operator"
		if a.pause.By != "" {
			s += " (" + a.pause.By + ")"
		}
		if a.pause.Reason != "" {
			s += ": " + a.pause.Reason
		}
		return s + "; no turn runs until a resume"
	case a.waiting != "":
		return "your turns wait for a dependency: " + a.waiting
	}
	return "you are sleeping between turns"
}

// asked logs and announces an ask's outcome (the asked event, which the
// metrics count).
func (a *Agent) asked(by hook.Audit, question string, ans Answer, outcome string, err error) {
	data := audited(by, map[string]any{"outcome": outcome, "question": textclip.Runes(question, 500, "…"), "duration_ms": ans.DurationMS})
	if ans.Model != "" {
		data["model"], data["tokens_in"], data["tokens_out"], data["cost_usd"] = ans.Model, ans.TokensIn, ans.TokensOut, ans.CostUSD
	}
	if ans.Text != "" {
		data["answer"] = textclip.Runes(ans.Text, 2000, "…")
	}
	if len(ans.NotRun) > 0 {
		data["calls_not_run"] = ans.NotRun
	}
	if err != nil {
		data["error"] = err.Error()
		a.log.Warn("ask not answered", "outcome", outcome, "by", by.By, "error", err, "cost_usd", ans.CostUSD, "duration_ms", ans.DurationMS)
	} else {
		a.log.Info("ask answered", "by", by.By, "model", ans.Model, "tokens_in", ans.TokensIn, "tokens_out", ans.TokensOut,
			"cost_usd", ans.CostUSD, "duration_ms", ans.DurationMS, "history_turns", ans.HistoryTurns, "calls_not_run", ans.NotRun)
	}
	a.emit(events.Asked, data)
}
