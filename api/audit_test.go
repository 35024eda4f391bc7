package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/inbox"
)

// TestVerbsAreAuditedWithTheTokenName: a pause with a reason is carried
// out on behalf of the token's name: the paused event names it, and the
// view and the status page show paused since, by and why. A reset's event
// carries the caller, the reason, the amount and the numbers before and
// after. A reason longer than control.MaxReason, or a field a verb does
// not take, is 400 and changes nothing. On the old code a reason was an
// unknown field (400) and nothing named the caller.
func TestVerbsAreAuditedWithTheTokenName(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	w.wantStatus(w.post("/v1/agents/alpha/pause", `{"reason": "`+strings.Repeat("x", control.MaxReason+1)+`"}`), http.StatusBadRequest)
	w.wantStatus(w.post("/v1/agents/alpha/pause", `{"drop_queued": true}`), http.StatusBadRequest)
	if w.agent("alpha").Status().Paused {
		t.Fatal("a refused pause paused the agent")
	}
	w.wantStatus(w.post("/v1/agents/alpha/pause", `{"reason": " db migration "}`), http.StatusOK)
	if e := w.waitEvent("alpha", events.Paused); e.Data["by"] != "ops" || e.Data["reason"] != "db migration" {
		t.Fatalf("paused event %v", e.Data)
	}
	w.clock.Advance(3 * time.Minute)
	var v api.AgentView
	if err := json.Unmarshal(w.get("/v1/agents/alpha").body, &v); err != nil {
		t.Fatal(err)
	}
	if !v.Paused || v.PausedBy != "ops" || v.PauseReason != "db migration" || v.PausedSince == nil || !v.PausedSince.Equal(epoch) {
		t.Fatalf("view of the paused agent: paused %v since %v by %q reason %q", v.Paused, v.PausedSince, v.PausedBy, v.PauseReason)
	}
	if page := string(w.get("/").body); !strings.Contains(page, "paused since 10:00:00 UTC (3m0s ago) by ops: db migration") {
		t.Fatalf("the status page does not say who paused the agent and why:\n%s", page)
	}

	w.agent("beta").Send(inbox.Message{Kind: inbox.Wake, Text: "spend", Source: "test"})
	w.waitEvent("beta", guard.EventTripped)
	r := w.post("/v1/agents/beta/guardrails/reset", `{"guardrail": "session_usd", "add_budget_usd": 4, "reason": "incident 42"}`)
	w.wantStatus(r, http.StatusOK)
	if res := r.json(t); res["ceiling_before_usd"] != 1.0 || res["ceiling_usd"] != 5.0 {
		t.Fatalf("reset result %s", r.body)
	}
	e := w.waitEvent("beta", guard.EventReset)
	for k, want := range map[string]any{"by": "ops", "reason": "incident 42", "guardrail": "session_usd", "add_budget_usd": 4.0,
		"spent_before_usd": 1.0, "ceiling_before_usd": 1.0, "spent_after_usd": 1.0, "ceiling_after_usd": 5.0, "cleared": true} {
		if e.Data[k] != want {
			t.Fatalf("guardrail-reset %s = %v, want %v: %v", k, e.Data[k], want, e.Data)
		}
	}
}

// TestInboxListsQueuedMessagesAndResumeDropsThem: GET .../inbox (role
// read) lists what waits on the owner — ids, kinds, sources, sizes, ages,
// not the text — and a resume with drop_queued abandons it: the reply
// counts them, each has a message-dropped event with reason
// operator_dropped naming the caller, and the listing is empty after. On
// the old code the route did not exist (404) and drop_queued was 400.
func TestInboxListsQueuedMessagesAndResumeDropsThem(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	w.wantStatus(w.post("/v1/agents/alpha/pause", ""), http.StatusOK)
	a := w.agent("alpha")
	a.Send(inbox.Message{ID: "alert-1", Kind: inbox.Wake, Text: "secret alert text", Source: "nats:alerts.db"})
	w.clock.Advance(2 * time.Minute)
	a.Send(inbox.Message{ID: "note-1", Kind: inbox.Deferred, Text: "later", Source: "api", From: "pipeline"})

	r := w.get("/v1/agents/alpha/inbox")
	w.wantStatus(r, http.StatusOK)
	if strings.Contains(string(r.body), "secret alert text") {
		t.Fatalf("the listing shows message text: %s", r.body)
	}
	var in control.Inbox
	if err := json.Unmarshal(r.body, &in); err != nil {
		t.Fatal(err)
	}
	if in.Agent != "alpha" || in.Pending != 1 || in.Deferred != 1 || len(in.Messages) != 2 {
		t.Fatalf("listing %s", r.body)
	}
	first, second := in.Messages[0], in.Messages[1]
	if first.ID != "alert-1" || first.Kind != "inbox" || first.Source != "nats:alerts.db" || first.SizeBytes != len("secret alert text")+len("alert-1")+len("nats:alerts.db") ||
		first.AgeSeconds != 120 || second.ID != "note-1" || second.Kind != "deferred" || second.From != "pipeline" || second.AgeSeconds != 0 {
		t.Fatalf("messages %+v", in.Messages)
	}
	w.wantStatus(w.call(http.MethodGet, "/v1/agents/nobody/inbox", readToken, "", ""), http.StatusNotFound)

	r = w.post("/v1/agents/alpha/resume", `{"drop_queued": true, "reason": "stale"}`)
	w.wantStatus(r, http.StatusOK)
	if got := r.json(t); got["dropped"] != 2.0 || got["ok"] != true {
		t.Fatalf("resume reply %s", r.body)
	}
	for range 2 {
		e := w.waitEvent("alpha", events.MessageDropped)
		if e.Data["reason"] != "operator_dropped" || e.Data["by"] != "ops" || e.Data["operator_reason"] != "stale" {
			t.Fatalf("message-dropped %v", e.Data)
		}
	}
	w.waitEvent("alpha", events.TurnSkipped) // nothing left to do: no model call
	if err := json.Unmarshal(w.get("/v1/agents/alpha/inbox").body, &in); err != nil || len(in.Messages) != 0 || in.Messages == nil {
		t.Fatalf("listing after the drop: %+v, %v", in, err)
	}
}
