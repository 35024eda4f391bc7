package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/guard"
)

// TestGuardrailBudgetIsFiniteAndBounded: an added budget above
// guard.MaxAddBudgetUSD, or one that would lift a ceiling above
// guard.MaxCeilingUSD, is 400 naming the limit and changes nothing — so
// 1e308 twice can no longer make a ceiling +Inf, after which the agent's
// view failed with 500 (json: unsupported value: +Inf). Amounts within
// the limits are added as before, up to the limits exactly. A stored
// ledger holding an infinite amount is repaired when restored, so no
// view fails to encode either.
func TestGuardrailBudgetIsFiniteAndBounded(t *testing.T) {
	t.Parallel()
	near := alpha()
	near.name = "near"
	near.limits.SessionUSD = guard.MaxCeilingUSD - 500
	w := newWorld(t, api.Options{}, alpha(), beta(), near)
	reset := func(agent, body string) reply {
		t.Helper()
		return w.post("/v1/agents/"+agent+"/guardrails/reset", body)
	}
	for range 2 {
		r := reset("alpha", `{"guardrail": "session_usd", "add_budget_usd": 1e308}`)
		w.wantStatus(r, http.StatusBadRequest)
		if msg := r.errorText(t); !strings.Contains(msg, "at most $1000000") {
			t.Fatalf("400 does not name the limit: %q", msg)
		}
	}
	for _, body := range []string{
		`{"guardrail": "session_usd", "add_budget_usd": 1000000.01}`,
		`{"guardrail": "daily_usd", "add_budget_usd": 1e7}`,
		`{"guardrail": "session_usd", "add_budget_usd": 1e309}`, // not a float64 at all
		`{"guardrail": "session_usd", "add_budget_usd": -1}`,
	} {
		w.wantStatus(reset("alpha", body), http.StatusBadRequest)
	}
	r := w.get("/v1/agents/alpha")
	w.wantStatus(r, http.StatusOK)
	var view struct {
		Guardrails guard.Status `json:"guardrails"`
	}
	decode(t, r.body, &view)
	if c := view.Guardrails.Session.CeilingUSD; c != 100 {
		t.Fatalf("session ceiling %v after refused resets, want the configured 100", c)
	}

	// The most one reset may add is added.
	r = reset("alpha", `{"guardrail": "session_usd", "add_budget_usd": 1000000}`)
	w.wantStatus(r, http.StatusOK)
	if m := r.json(t); m["ceiling_usd"] != 1_000_100.0 {
		t.Fatalf("reset of the most one may add: %s", r.body)
	}

	// A ceiling may reach MaxCeilingUSD, not pass it.
	r = reset("near", `{"guardrail": "session_usd", "add_budget_usd": 501}`)
	w.wantStatus(r, http.StatusBadRequest)
	if msg := r.errorText(t); !strings.Contains(msg, "$1000000000") || !strings.Contains(msg, "session_usd") {
		t.Fatalf("400 does not name the ceiling limit: %q", msg)
	}
	w.wantStatus(reset("near", `{"guardrail": "session_usd", "add_budget_usd": 500}`), http.StatusOK)
	w.wantStatus(reset("near", `{"guardrail": "session_usd", "add_budget_usd": 0.01}`), http.StatusBadRequest)
	// A stored ledger holding 1e999 (an infinite spend) is repaired when
	// the agent is restored: its views still encode.
	if _, err := w.store.Put(t.Context(), "guard.beta", []byte(`{"session_spent_usd": 1e999, "session_added_usd": 1e999}`)); err != nil {
		t.Fatal(err)
	}
	if err := w.guard.Restore(t.Context(), "beta"); err != nil {
		t.Fatalf("restore of a ledger holding 1e999: %v", err)
	}
	r = w.get("/v1/agents/beta")
	w.wantStatus(r, http.StatusOK)
	decode(t, r.body, &view)
	if s := view.Guardrails.Session; s.SpentUSD != guard.MaxCeilingUSD || s.CeilingUSD != 1 {
		t.Fatalf("beta's repaired session %+v", s)
	}
	for _, path := range []string{"/v1/agents/near", "/v1/agents", "/"} {
		r := w.get(path)
		w.wantStatus(r, http.StatusOK)
		if path != "/" && !json.Valid(r.body) {
			t.Fatalf("%s: %s", path, r.body)
		}
	}
}
