package driver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/models/scripted"
)

// instruction is the system instruction of model call n (1-based).
func (h *harness) instruction(n int) string {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	req := h.requests[n-1]
	if req.Config == nil || req.Config.SystemInstruction == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range req.Config.SystemInstruction.Parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// TestReplaceAtTheNextTurn: a new Spec given while a turn runs waits for
// it (the running turn keeps its instruction, and is never cancelled);
// the message that arrived meanwhile is handed to the new agent and run
// once, with the new instruction.
func TestReplaceAtTheNextTurn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("ok")})
	h.holdCalls()
	h.a.Send(wakeMsg("one"))
	h.waitCall()

	m, err := scripted.New("fake", config.Model{Provider: "scripted", Script: []config.ScriptStep{text("ok")}, Loop: true},
		scripted.WithHook(h.hook))
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Name: "tester", Instruction: "You are the new agent.", Model: m, HistoryTurns: 20}
	replaced := make(chan error, 1)
	go func() { replaced <- h.d.Replace(context.Background(), spec, Handover{}) }()
	wait.For(t, "the gate to close for the swap", func() bool { return h.a.Gate() == "standby" })
	select {
	case err := <-replaced:
		t.Fatalf("Replace returned while the turn ran: %v", err)
	default:
	}
	h.a.Send(wakeMsg("two")) // queued behind the closed gate: handed over
	h.release()
	if err := <-replaced; err != nil {
		t.Fatal(err)
	}
	if e := h.waitEvent(events.TurnCompleted); e.Data["outcome"] != nil && e.Data["outcome"] != "completed" {
		t.Fatalf("the running turn did not complete: %v", e.Data)
	}
	now, _ := h.d.Agent("tester")
	if now == h.a {
		t.Fatal("the agent was not replaced")
	}
	if !strings.Contains(h.instruction(1), "You are a test agent.") {
		t.Fatalf("the running turn's instruction: %q", h.instruction(1))
	}
	h.waitEvent(events.TurnCompleted)
	last := h.modelCalls()
	if got := h.instruction(last); !strings.Contains(got, "You are the new agent.") {
		t.Fatalf("the next turn's instruction: %q", got)
	}
	if p := h.prompt(last); !strings.Contains(p, "two") || strings.Contains(p, "one") {
		t.Fatalf("the next turn's prompt: %q", p)
	}
	handled := 0
	for _, e := range append(h.seen, drain(h)...) {
		if e.Type == events.MessageHandled {
			handled++
		}
	}
	if handled != 2 {
		t.Fatalf("%d messages handled, want 2 (one each)", handled)
	}
}

// drain returns the events waiting, without blocking.
func drain(h *harness) []events.Event {
	var out []events.Event
	for {
		select {
		case e := <-h.sub.C:
			out = append(out, e)
		default:
			return out
		}
	}
}

// TestRemoveWaitsForTheTurn: Remove closes the gate, lets the running
// turn finish, and then the agent is gone; a wake after that starts
// nothing.
func TestRemoveWaitsForTheTurn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("ok")})
	h.holdCalls()
	h.a.Send(wakeMsg("one"))
	h.waitCall()
	removed := make(chan error, 1)
	go func() { removed <- h.d.Remove(context.Background(), "tester", nil) }()
	wait.For(t, "the gate to close", func() bool { return h.a.Gate() == "standby" })
	h.release()
	if err := <-removed; err != nil {
		t.Fatal(err)
	}
	if e := h.waitEvent(events.TurnCompleted); e.Agent != "tester" {
		t.Fatal(e)
	}
	if _, err := h.d.Agent("tester"); err == nil {
		t.Fatal("the removed agent is still registered")
	}
	wait.For(t, "the removed agent's loop to end", func() bool { return h.a.State() == Stopped })
	calls := h.modelCalls()
	h.a.Wake(Cause{Source: SourceOperator})
	h.clock.Advance(time.Hour)
	if h.a.Running() || h.modelCalls() != calls {
		t.Fatal("a removed agent ran a turn")
	}
}
