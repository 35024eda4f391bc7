package driver

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/adk/model"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// historyRecords counts the turn records the store holds for the agent.
func (h *harness) historyRecords() int {
	h.t.Helper()
	raw, err := h.d.deps.Store.Tail(context.Background(), "history."+AppName+".tester.tester", 0)
	if err != nil {
		h.t.Fatal(err)
	}
	return len(raw)
}

// request returns model call n (1-based) as the model got it.
func (h *harness) request(n int) *model.LLMRequest {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.requests[n-1]
}

// contentsText is every text of model call n's contents, in order.
func (h *harness) contentsText(n int) string {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, c := range h.requests[n-1].Contents {
		for _, p := range c.Parts {
			b.WriteString(p.Text)
			b.WriteString("\n")
		}
	}
	return b.String()
}

// waitRestored waits until the agent has loaded its stored state: an ask
// before is refused (ErrNotOwner).
func (h *harness) waitRestored() {
	h.t.Helper()
	wait.For(h.t, "the agent's state restored", func() bool {
		h.a.mu.Lock()
		defer h.a.mu.Unlock()
		return h.a.gate.restored
	})
}

// An ask made while a turn runs is answered at once — its model call is
// made while the turn's is held — from the agent's instruction, memory
// and committed turns (not the running turn's input), and leaves no
// record in the history: the running turn's is the only one added.
func TestAskWhileATurnRunsSeesTheTurnsContextAndWritesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("noted")}, func(s *Spec) { s.Memory.Enabled = true })
	h.waitRestored()
	h.a.mem.mu.Lock()
	h.a.mem.rec.Text = "the vault token rotates at noon"
	h.a.mem.mu.Unlock()
	h.a.Send(wakeMsg("db-1 disk at 95%"))
	h.waitCall()
	h.waitIdle()
	if n := h.historyRecords(); n != 1 {
		t.Fatalf("%d history records after one turn", n)
	}

	h.holdCalls()
	h.a.Send(wakeMsg("payments latency doubled"))
	if h.waitCall() != 2 {
		t.Fatal("the second turn's call is not call 2")
	}
	type result struct {
		ans Answer
		err error
	}
	done := make(chan result, 1)
	go func() {
		ans, err := h.a.Ask(context.Background(), hook.Audit{By: "ops"}, "why did you page me?")
		done <- result{ans, err}
	}()
	if h.waitCall() != 3 {
		t.Fatal("the ask's call is not call 3")
	}
	if h.a.State() != Running {
		t.Fatalf("the turn is not running while the ask is asked: %s", h.a.State())
	}
	h.release()
	r := <-done
	if r.err != nil || r.ans.Text != "noted" || r.ans.TokensIn != 100 || r.ans.TokensOut != 10 || r.ans.Model != "fake" || r.ans.HistoryTurns != 1 {
		t.Fatalf("ask: %+v, %v", r.ans, r.err)
	}
	h.waitIdle()

	sys, contents := systemText(h.request(3)), h.contentsText(3)
	for _, want := range []string{"You are a test agent.", "the vault token rotates at noon"} {
		if !strings.Contains(sys, want) {
			t.Errorf("the ask's system instruction lacks %q:\n%s", want, sys)
		}
	}
	for _, want := range []string{"db-1 disk at 95%", "noted", `side question from the operator "ops"`, "your turn 2 is running now", "why did you page me?"} {
		if !strings.Contains(contents, want) {
			t.Errorf("the ask's contents lack %q:\n%s", want, contents)
		}
	}
	if strings.Contains(contents, "payments latency doubled") {
		t.Errorf("the ask saw the running turn's input:\n%s", contents)
	}
	if n, turns := h.historyRecords(), h.a.Status().Turns; n != 2 || turns != 2 {
		t.Fatalf("%d history records after two turns and an ask (turns %d): the ask was recorded", n, turns)
	}
	h.a.Send(wakeMsg("payments latency is back to normal"))
	h.waitCall()
	h.waitIdle()
	if c := h.contentsText(4); strings.Contains(c, "why did you page me?") || !strings.Contains(c, "payments latency doubled") {
		t.Fatalf("the next turn's contents hold the ask, or lack the turn before:\n%s", c)
	}
	e := h.waitEvent(events.Asked)
	if e.Data["outcome"] != AskAnswered || e.Data["by"] != "ops" || e.Data["answer"] != "noted" || e.Data["question"] != "why did you page me?" {
		t.Fatalf("asked event %v", e.Data)
	}
}

// A paused agent answers; a function call in the answer is not run (it
// is named instead), the tools the history used are declared with
// function calling off, and the agent stays paused with no turn run.
func TestAskOfAPausedAgentRunsNoToolAndNoTurn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{
		call("schedule_next_turn", map[string]any{"wake_in_seconds": 600}), text("sleeping"),
		call("report_done", map[string]any{"summary": "done"}),
	})
	h.a.Send(wakeMsg("check the backlog"))
	h.waitEvent(events.TurnCompleted)
	h.waitIdle()
	h.a.PauseAs(hook.Audit{By: "ops", Reason: "migration"})

	ans, err := h.a.Ask(context.Background(), hook.Audit{By: "ops"}, "what are you waiting for?")
	if err != nil || !slices.Equal(ans.NotRun, []string{"report_done"}) || ans.Text != "" {
		t.Fatalf("ask: %+v, %v", ans, err)
	}
	cfg := h.request(3).Config
	if cfg.ToolConfig == nil || cfg.ToolConfig.FunctionCallingConfig.Mode != genai.FunctionCallingConfigModeNone {
		t.Fatalf("function calling not off: %+v", cfg.ToolConfig)
	}
	var declared []string
	for _, tl := range cfg.Tools {
		for _, d := range tl.FunctionDeclarations {
			declared = append(declared, d.Name)
		}
	}
	if !slices.Equal(declared, []string{"schedule_next_turn"}) {
		t.Fatalf("declared %v, want the history's schedule_next_turn only", declared)
	}
	if !strings.Contains(h.contentsText(3), "you are paused by an operator (ops): migration") {
		t.Fatalf("the ask is not told the agent is paused:\n%s", h.contentsText(3))
	}
	if h.count(events.ReportDone) != 0 || h.a.State() != Paused || h.a.Status().Turns != 1 || h.modelCalls() != 3 {
		t.Fatalf("the ask ran a tool or a turn: report-done %d, state %s, turns %d, calls %d",
			h.count(events.ReportDone), h.a.State(), h.a.Status().Turns, h.modelCalls())
	}
}

// A halted agent answers no ask (no model call), and one ask at a time
// is answered: a second while the first runs is refused.
func TestAskRefusedWhenHaltedAndWhileAnotherRuns(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("noted")})
	h.waitRestored()
	h.a.Halt("session spend $10 reached the session ceiling of $10")
	_, err := h.a.Ask(context.Background(), hook.Audit{By: "ops"}, "why are you halted?")
	if !errors.Is(err, hook.ErrHalted) || h.modelCalls() != 0 {
		t.Fatalf("ask of a halted agent: %v, %d model calls", err, h.modelCalls())
	}
	if e := h.waitEvent(events.Asked); e.Data["outcome"] != AskRefused {
		t.Fatalf("asked event %v", e.Data)
	}
	h.a.ClearHalt()

	h.holdCalls()
	first := make(chan error, 1)
	go func() {
		_, err := h.a.Ask(context.Background(), hook.Audit{By: "ops"}, "first")
		first <- err
	}()
	h.waitCall()
	if _, err := h.a.Ask(context.Background(), hook.Audit{By: "ops"}, "second"); !errors.Is(err, ErrAskBusy) {
		t.Fatalf("a second ask while one runs: %v", err)
	}
	h.release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if _, err := h.a.Ask(context.Background(), hook.Audit{}, " "); !errors.Is(err, ErrNoQuestion) {
		t.Fatalf("an empty question: %v", err)
	}
}

// An ask whose model does not answer before the caller's deadline ends
// with ErrAskTimeout, outcome timeout.
func TestAskTimesOut(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("noted")})
	h.waitRestored()
	h.holdCalls()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := h.a.Ask(ctx, hook.Audit{By: "ops"}, "are you there?")
	if !errors.Is(err, ErrAskTimeout) {
		t.Fatalf("ask past its deadline: %v", err)
	}
	if e := h.waitEvent(events.Asked); e.Data["outcome"] != AskTimeout {
		t.Fatalf("asked event %v", e.Data)
	}
}
