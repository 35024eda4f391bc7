package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// delta runs on the priced model ($1 a call) with a session ceiling a
// hair above $1: its first ask fits, the next one's estimate does not.
func delta() agentDef {
	return agentDef{
		name: "delta", model: "priced-1",
		script: []config.ScriptStep{{Text: "db-1's disk reached 95%, and you are on call", Usage: config.Usage{Input: 100_000}}},
		limits: guard.Limits{SessionUSD: 1.001},
	}
}

// historyRecords counts the turn records the store holds for agent.
func (w *world) historyRecords(agent string) int {
	w.t.Helper()
	raw, err := w.store.Tail(context.Background(), "history."+driver.AppName+"."+agent+"."+agent, 0)
	if err != nil {
		w.t.Fatal(err)
	}
	return len(raw)
}

// An ask is answered from the agent's context with the priced cost
// charged to its session spend, and leaves the history as it was: the
// same records, no turn. The write log names the token; the asked event
// names it as who asked.
func TestAskIsAnsweredChargedAndNotRecorded(t *testing.T) {
	t.Parallel()
	d := delta()
	d.limits.SessionUSD = 10
	w := newWorld(t, api.Options{}, d)
	w.agent("delta").Send(inbox.Message{Kind: inbox.Wake, Text: "db-1 disk at 95%", Source: "test"})
	w.waitTurnDone("delta")
	records, turns := w.historyRecords("delta"), w.agent("delta").Status().Turns
	before, _ := w.guard.Status("delta")

	r := w.post("/v1/agents/delta/ask", `{"question": "why did you page me?"}`)
	w.wantStatus(r, http.StatusOK)
	var ans control.AskAnswer
	decode(t, r.body, &ans)
	if !strings.Contains(ans.Text, "you are on call") || ans.Model != "priced-1" || ans.TokensIn != 100_000 || ans.CostUSD != 1 || ans.HistoryTurns != 1 {
		t.Fatalf("answer %s", r.body)
	}
	after, _ := w.guard.Status("delta")
	if got := after.Session.SpentUSD - before.Session.SpentUSD; got != 1 {
		t.Fatalf("session spend rose by $%v, want the ask's $1", got)
	}
	if n, tn := w.historyRecords("delta"), w.agent("delta").Status().Turns; n != records || tn != turns {
		t.Fatalf("history records %d → %d, turns %d → %d: the ask was recorded", records, n, turns, tn)
	}
	if e := w.waitEvent("delta", events.Asked); e.Data["by"] != "ops" || e.Data["outcome"] != driver.AskAnswered {
		t.Fatalf("asked event %v", e.Data)
	}
	wait.For(t, "the ask's write log line", func() bool {
		return strings.Contains(w.logs.String(), "action=ask agent=delta token=ops status=200")
	})

	w.wantStatus(w.post("/v1/agents/delta/ask", `{}`), http.StatusBadRequest)
	w.wantStatus(w.post("/v1/agents/delta/ask", `{"question": "x", "turn": true}`), http.StatusBadRequest)
	w.wantStatus(w.call(http.MethodPost, "/v1/agents/delta/ask", readToken, "application/json", `{"question": "why?"}`), http.StatusForbidden)
}

// An ask whose estimated cost would reach a ceiling is refused (409)
// naming the guardrail, with no model call and no halt; an ask of a
// halted agent is refused naming the guardrail that tripped.
func TestAskRefusedAtACeilingAndWhenHalted(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{}, delta())
	wait.For(t, "delta's state restored", func() bool {
		return w.post("/v1/agents/delta/ask", `{"question": "are you there?"}`).status == http.StatusOK
	})
	var refusal struct {
		Error     string  `json:"error"`
		Guardrail string  `json:"guardrail"`
		Spent     float64 `json:"spent_usd"`
		Ceiling   float64 `json:"ceiling_usd"`
		Estimate  float64 `json:"estimate_usd"`
		Tripped   bool    `json:"tripped"`
	}
	r := w.post("/v1/agents/delta/ask", `{"question": "and now?"}`)
	w.wantStatus(r, http.StatusConflict)
	decode(t, r.body, &refusal)
	if refusal.Guardrail != guard.Session || refusal.Spent != 1 || refusal.Ceiling != 1.001 || refusal.Estimate <= 0 || refusal.Tripped {
		t.Fatalf("refusal at the ceiling %s", r.body)
	}
	if calls, state := w.models["delta"].Calls(), w.agent("delta").State(); calls != 1 || state == driver.Halted {
		t.Fatalf("%d model calls, state %s: the refused ask called the model or halted the agent", calls, state)
	}

	w.guard.Charge("delta", 0.01) // over the ceiling: halted
	wait.For(t, "delta halted", func() bool { return w.agent("delta").State() == driver.Halted })
	r = w.post("/v1/agents/delta/ask", `{"question": "why are you halted?"}`)
	w.wantStatus(r, http.StatusConflict)
	decode(t, r.body, &refusal)
	if refusal.Guardrail != guard.Session || !refusal.Tripped || !strings.Contains(refusal.Error, "halted") {
		t.Fatalf("refusal when halted %s", r.body)
	}
}

// An ask the model does not answer within the owner's ask timeout is
// 504, and the agent goes on.
func TestAskTimesOutWith504(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{}, agentDef{name: "slow", model: "fake-1", script: []config.ScriptStep{{Hang: true}}})
	ctl, err := control.New(control.Options{Driver: w.driver, Guard: w.guard, AskTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Options{Driver: w.driver, Guard: w.guard, Scheduler: w.sched, Tokens: tokens, Control: ctl, Clock: w.clock})
	if err != nil {
		t.Fatal(err)
	}
	w.ts = httptest.NewServer(srv.Handler())
	t.Cleanup(w.ts.Close)
	var r reply
	wait.For(t, "an ask past the agent's restore", func() bool {
		r = w.post("/v1/agents/slow/ask", `{"question": "are you there?"}`)
		return r.status != http.StatusServiceUnavailable
	})
	w.wantStatus(r, http.StatusGatewayTimeout)
	if e := r.errorText(t); !strings.Contains(e, "not answered in time") {
		t.Fatalf("504 %s", r.body)
	}
	if e := w.waitEvent("slow", events.Asked); e.Data["outcome"] != driver.AskTimeout {
		t.Fatalf("asked event %v", e.Data)
	}
}
