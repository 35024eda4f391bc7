package api_test

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// gamma runs on the priced model without a ceiling: each model call
// costs $1. Its turn calls report_done and then says what it did.
func gamma() agentDef {
	return agentDef{
		name: "gamma", model: "priced-1",
		script: []config.ScriptStep{
			{Call: &config.Call{Name: "report_done", Args: map[string]any{"summary": "rotated"}}, Usage: config.Usage{Input: 100_000}},
			{Text: "certificates rotated", Usage: config.Usage{Input: 100_000, Output: 12}},
		},
	}
}

func (w *world) turns(query string) (int, api.TurnList) {
	w.t.Helper()
	r := w.get("/v1/agents/gamma/turns" + query)
	var l api.TurnList
	if r.status == http.StatusOK {
		decode(w.t, r.body, &l)
	}
	return r.status, l
}

// GET .../turns lists the newest turns first with their messages, tool
// calls, text, tokens and cost; limit defaults to 10, and a limit that is
// not 1..64 is a 400 JSON error. The status page shows the last turns.
func TestTurnsAPI(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{}, gamma())
	if code, l := w.turns(""); code != http.StatusOK || l.Agent != "gamma" || len(l.Turns) != 0 {
		t.Fatalf("before any turn: %d %+v", code, l)
	}
	w.wantStatus(w.post("/v1/agents/gamma/messages", `{"text": "rotate the certificates", "id": "job-1"}`), http.StatusAccepted)
	w.waitTurnDone("gamma")
	var l api.TurnList
	wait.For(t, "turn 1 listed", func() bool { _, l = w.turns(""); return len(l.Turns) == 1 })
	tr := l.Turns[0]
	if tr.N != 1 || tr.Outcome != "completed" || tr.Text != "certificates rotated" || math.Abs(tr.CostUSD-2) > 1e-9 ||
		tr.TokensIn != 200_000 || tr.TokensOut != 12 || tr.ModelCalls != 2 || tr.DurationSeconds < 0 || tr.Started.IsZero() {
		t.Fatalf("turn: %+v", tr)
	}
	if len(tr.Messages) != 1 || tr.Messages[0].ID != "job-1" || tr.Messages[0].Source != api.SourceAPI || tr.MessageCount != 1 {
		t.Fatalf("messages: %+v", tr.Messages)
	}
	if len(tr.ToolCalls) != 1 || tr.ToolCalls[0].Name != "report_done" || tr.ToolCalls[0].Args != `{"summary":"rotated"}` || tr.ToolCalls[0].Outcome != "ok" {
		t.Fatalf("tool calls: %+v", tr.ToolCalls)
	}
	if len(tr.Wakes) != 1 || !strings.Contains(tr.Wakes[0], "inbox") {
		t.Fatalf("wakes: %v", tr.Wakes)
	}

	for n := 2; n <= 12; n++ {
		w.wantStatus(w.post("/v1/agents/gamma/wake", fmt.Sprintf(`{"message": "round %d"}`, n)), http.StatusOK)
		wait.For(t, fmt.Sprintf("turn %d", n), func() bool { st := w.agent("gamma").Status(); return st.LastTurn != nil && st.LastTurn.N == uint64(n) })
	}
	wait.For(t, "12 turns recorded", func() bool { _, l = w.turns("?limit=64"); return len(l.Turns) == 12 })
	if _, l := w.turns(""); len(l.Turns) != api.DefaultTurnsLimit || l.Turns[0].N != 12 || l.Turns[9].N != 3 {
		t.Fatalf("default limit: %d turns, newest %d", len(l.Turns), l.Turns[0].N)
	}
	if _, l := w.turns("?limit=2"); len(l.Turns) != 2 || l.Turns[1].N != 11 {
		t.Fatalf("limit=2: %+v", l)
	}
	for _, q := range []string{"?limit=0", "?limit=65", "?limit=ten", "?limit=-1", "?limit="} {
		r := w.get("/v1/agents/gamma/turns" + q)
		w.wantStatus(r, http.StatusBadRequest)
		if msg := r.errorText(t); !strings.Contains(msg, "limit must be a whole number from 1 to 64") {
			t.Fatalf("%s: %s", q, msg)
		}
	}

	page := string(w.get("/").body)
	for _, want := range []string{`data-turns-of="gamma"`, `data-turn="12"`, `data-turn="10"`, `report_done (ok)`, `$2`, `certificates rotated`} {
		if !strings.Contains(page, want) {
			t.Errorf("status page lacks %q", want)
		}
	}
	if strings.Contains(page, `data-turn="9"`) {
		t.Errorf("status page shows more than %d turns", api.PageTurns)
	}
}
