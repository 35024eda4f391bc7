package driver

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/hook"
)

// An operator's message steered into a running tool loop is in the turn's
// second model call, as operator text after the tool's result; the turn
// records it (its id is handled by that turn, later turns see it in
// history). With no turn running, a steer wakes the agent with it.
func TestSteeredMessageReachesTheRunningTurnsNextModelCall(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{call("report_done", map[string]any{"summary": "looking"}), text("done"), text("next")})
	h.holdCalls()
	h.a.Send(wakeMsg("disk full on db-1"))
	h.waitCall() // the first call of the turn is held
	st, err := h.a.Steer(hook.Audit{By: "ops"}, "also check db-2")
	if err != nil || st.Turn != 1 || st.Woke || st.ID == "" {
		t.Fatalf("steer into a running turn: %+v, %v", st, err)
	}
	h.release()
	if e := h.waitEvent(events.Steered); e.Data["id"] != st.ID || e.Data["turn"] != uint64(1) || e.Data["by"] != "ops" {
		t.Fatalf("steered event %v", e.Data)
	}
	done := h.waitEvent(events.TurnCompleted)
	if n := h.modelCalls(); n != 2 {
		t.Fatalf("%d model calls in the turn, want 2", n)
	}
	if p := h.prompt(2); !strings.Contains(p, "Message from the operator:\nalso check db-2") || strings.Contains(p, "untrusted") {
		t.Fatalf("the second call's newest user text is not the steered operator message:\n%s", p)
	}
	if strings.Contains(h.prompt(1), "db-2") {
		t.Fatal("the first call saw the message steered after it began")
	}
	if ids, _ := done.Data["ids"].([]string); !slices.Contains(ids, st.ID) {
		t.Fatalf("turn-completed ids %v lack the steered message", done.Data["ids"])
	}
	if m := h.a.Message(st.ID); m.Status != MessageHandled || m.Turn != 1 {
		t.Fatalf("steered message lookup: %+v", m)
	}

	next, err := h.a.Steer(hook.Audit{By: "ops"}, "then restart it")
	if err != nil || !next.Woke || next.Turn != 0 {
		t.Fatalf("steer with no turn running: %+v, %v", next, err)
	}
	h.waitEvent(events.TurnCompleted)
	if p := h.prompt(3); !strings.Contains(p, "Message from the operator:\nthen restart it") {
		t.Fatalf("the woken turn's prompt lacks the operator message:\n%s", p)
	}
	if !inHistory(h, 3, "also check db-2") {
		t.Fatal("the next turn's history lacks the message steered into turn 1")
	}
}

// inHistory reports whether model call n's request shows text in a user
// content before its newest one (that is, from history).
func inHistory(h *harness, n int, text string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	cs := h.requests[n-1].Contents
	for _, c := range cs[:len(cs)-1] {
		for _, p := range c.Parts {
			if c.Role == genai.RoleUser && strings.Contains(p.Text, text) {
				return true
			}
		}
	}
	return false
}
