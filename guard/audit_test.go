package guard_test

import (
	"testing"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// TestEveryResetEmitsItsAuditTrail: a reset that lifts a trip and one that
// only adds budget each emit one guardrail-reset event with who asked,
// why, the guardrail, the amount added and the spend and ceiling before
// and after; a refused reset emits none. On the old code the event said
// only the guardrail, and a reset that lifted no trip said nothing.
func TestEveryResetEmitsItsAuditTrail(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(epoch)
	w := build(t, c, memstore.New(c), guard.Options{}, agentDef{
		name: "a", model: "priced-1", script: []config.ScriptStep{dollarText("done")}, limits: guard.Limits{SessionUSD: 1},
	})
	w.send("a", "spend a dollar")
	if e := w.waitEvent(guard.EventTripped); e.Data["guardrail"] != guard.Session {
		t.Fatalf("tripped %v", e.Data)
	}
	if _, err := w.guard.ResetAs("a", guard.Session, 0, hook.Audit{By: "alice"}); err == nil {
		t.Fatal("a reset that trips again at once was not refused")
	}
	if _, err := w.guard.ResetAs("a", guard.Session, 2, hook.Audit{By: "alice", Reason: "incident 42"}); err != nil {
		t.Fatal(err)
	}
	e := w.waitEvent(guard.EventReset)
	want := map[string]any{
		"by": "alice", "reason": "incident 42", "guardrail": guard.Session, "add_budget_usd": 2.0, "cleared": true,
		"spent_before_usd": 1.0, "ceiling_before_usd": 1.0, "spent_after_usd": 1.0, "ceiling_after_usd": 3.0,
	}
	for k, v := range want {
		if e.Data[k] != v {
			t.Fatalf("guardrail-reset %s = %v, want %v (event %v)", k, e.Data[k], v, e.Data)
		}
	}
	w.waitEvent(events.TurnCompleted) // reopened: the queued message ran ($2 of $3 now)

	res, err := w.guard.ResetAs("a", guard.Session, 0.5, hook.Audit{By: "bob"})
	if err != nil || res.Cleared || res.CeilingBeforeUSD != 3 || res.CeilingUSD != 3.5 {
		t.Fatalf("budget without a trip: %+v, %v", res, err)
	}
	e = w.waitEvent(guard.EventReset)
	if e.Data["by"] != "bob" || e.Data["cleared"] != false || e.Data["ceiling_before_usd"] != 3.0 || e.Data["ceiling_after_usd"] != 3.5 ||
		e.Data["spent_before_usd"] != 2.0 || e.Data["reason"] != nil {
		t.Fatalf("guardrail-reset without a trip %v", e.Data)
	}
}
