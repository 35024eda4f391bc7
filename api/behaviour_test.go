package api_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/models/scripted"
)

func TestMessageWakesOnceAndDuplicateIDQueuesNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	r := w.post("/v1/agents/alpha/messages", `{"text": "disk full on db-1", "id": "evt-42", "from": "nagios"}`)
	w.wantStatus(r, http.StatusAccepted)
	if m := r.json(t); m["queued"] != true || m["duplicate"] != false || m["id"] != "evt-42" || m["kind"] != "inbox" {
		t.Fatalf("first answer %s", r.body)
	}
	r = w.post("/v1/agents/alpha/messages", `{"text": "disk full on db-1", "id": "evt-42"}`)
	w.wantStatus(r, http.StatusOK)
	if m := r.json(t); m["queued"] != false || m["duplicate"] != true {
		t.Fatalf("duplicate answer %s", r.body)
	}
	w.waitEvent("alpha", "turn-completed")
	w.waitTurnDone("alpha")
	st := w.agent("alpha").Status()
	if n := w.models["alpha"].Calls(); n != 1 || st.Turns != 1 || st.InboxPending != 0 || st.PendingWakes != 0 {
		t.Fatalf("after a message and its duplicate: %d model calls, status %+v", n, st)
	}
	// The same id for another agent is another message.
	w.wantStatus(w.post("/v1/agents/beta/messages", `{"text": "x", "id": "evt-42", "wake": false}`), http.StatusAccepted)

	// Without an id the server makes one.
	r = w.post("/v1/agents/alpha/messages", `{"text": "no id", "wake": false}`)
	w.wantStatus(r, http.StatusAccepted)
	if id, _ := r.json(t)["id"].(string); !strings.HasPrefix(id, "api-") {
		t.Fatalf("generated id %q", id)
	}
}

func TestDeferredMessageDoesNotWake(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	r := w.post("/v1/agents/alpha/messages", `{"text": "fyi: deploy at 14:00", "wake": false}`)
	w.wantStatus(r, http.StatusAccepted)
	if r.json(t)["kind"] != "deferred" {
		t.Fatalf("answer %s", r.body)
	}
	st := w.agent("alpha").Status()
	if st.Deferred != 1 || st.InboxPending != 0 || st.PendingWakes != 0 {
		t.Fatalf("status %+v", st)
	}
	v := w.get("/v1/agents/alpha").json(t)
	if v["deferred_pending"] != 1.0 || v["inbox_pending"] != 0.0 {
		t.Fatalf("view %v", v)
	}
}

func TestMessageValidation(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	for _, body := range []string{`{}`, `{"text": "   "}`, `{"text": 7}`, `{"text": "x", "urgent": true}`, `[]`, ""} {
		r := w.post("/v1/agents/alpha/messages", body)
		w.wantStatus(r, http.StatusBadRequest)
		r.errorText(t)
	}
	r := w.post("/v1/agents/alpha/messages", `{"text": "x", "attributes": {"host": "db-1"}}`)
	w.wantStatus(r, http.StatusAccepted)
	// charset parameters are fine.
	r = w.call(http.MethodPost, "/v1/agents/alpha/messages", operateToken, "application/json; charset=utf-8", `{"text": "y"}`)
	w.wantStatus(r, http.StatusAccepted)
}

func TestAlertmanagerRetryMakesOneTurn(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	payload := alertmanagerFiring(t)
	first := w.post("/v1/alertmanager/alpha", payload)
	second := w.post("/v1/alertmanager/alpha", payload)
	w.wantStatus(first, http.StatusAccepted)
	w.wantStatus(second, http.StatusOK)
	f, s := first.json(t), second.json(t)
	if f["queued"] != true || f["duplicate"] != false || f["kind"] != "inbox" {
		t.Fatalf("first %s", first.body)
	}
	if s["queued"] != false || s["duplicate"] != true || s["id"] != f["id"] {
		t.Fatalf("retry %s", second.body)
	}
	w.waitEvent("alpha", "turn-completed")
	w.waitTurnDone("alpha")
	st := w.agent("alpha").Status()
	if n := w.models["alpha"].Calls(); n != 1 || st.Turns != 1 || st.InboxPending != 0 || st.PendingWakes != 0 {
		t.Fatalf("a retried notification: %d model calls, status %+v", n, st)
	}
	// Retried again once the window has passed, it is a new message.
	w.clock.Advance(api.DefaultDedupWindow + time.Second)
	w.wantStatus(w.post("/v1/alertmanager/alpha", payload), http.StatusAccepted)
}

// resolved turns the firing fixture into an all-resolved notification.
func resolved(t *testing.T) string {
	p := alertmanagerFiring(t)
	p = strings.ReplaceAll(p, `"status": "firing"`, `"status": "resolved"`)
	if strings.Contains(p, "firing") {
		t.Fatal("fixture still fires")
	}
	return p
}

func TestAlertmanagerAllResolvedIsDeferred(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	r := w.post("/v1/alertmanager/alpha", resolved(t))
	w.wantStatus(r, http.StatusAccepted)
	if r.json(t)["kind"] != "deferred" {
		t.Fatalf("answer %s", r.body)
	}
	st := w.agent("alpha").Status()
	if st.Deferred != 1 || st.InboxPending != 0 || st.PendingWakes != 0 || w.models["alpha"].Calls() != 0 {
		t.Fatalf("an all-resolved notification woke the agent: %+v", st)
	}

	w2 := newWorld(t, api.Options{ResolvedWakes: true})
	r = w2.post("/v1/alertmanager/alpha", resolved(t))
	w2.wantStatus(r, http.StatusAccepted)
	if r.json(t)["kind"] != "inbox" {
		t.Fatalf("with ResolvedWakes: %s", r.body)
	}
	w2.waitEvent("alpha", "turn-completed")
}

func TestAlertmanagerRejectsOtherBodies(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	for _, body := range []string{`{"text": "an envelope"}`, `{"status": "firing", "alerts": []}`, `{"status": "firing", "alerts": 3}`} {
		r := w.post("/v1/alertmanager/alpha", body)
		w.wantStatus(r, http.StatusBadRequest)
		r.errorText(t)
	}
	r := w.post("/v1/alertmanager/alpha", "")
	w.wantStatus(r, http.StatusBadRequest)
}

func TestGuardrailResetRefusedWithTheNumbers(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	w.wantStatus(w.post("/v1/agents/beta/messages", `{"text": "spend a dollar"}`), http.StatusAccepted)
	if e := w.waitEvent("beta", guard.EventTripped); e.Data["guardrail"] != guard.Session {
		t.Fatalf("tripped %v", e.Data)
	}
	wait.For(t, "beta halted", func() bool { return w.agent("beta").State() == driver.Halted })

	v := w.get("/v1/agents/beta").json(t)
	g, _ := v["guardrails"].(map[string]any)
	session, _ := g["session"].(map[string]any)
	if v["state"] != "halted" || v["halt_reason"] == "" || session["spent_usd"] != 1.0 || session["ceiling_usd"] != 1.0 || g["trip"] == nil {
		t.Fatalf("view of a tripped agent: %s", w.get("/v1/agents/beta").body)
	}

	r := w.post("/v1/agents/beta/wake", "")
	w.wantStatus(r, http.StatusConflict)
	if msg := r.errorText(t); !strings.Contains(msg, "halted") {
		t.Fatalf("wake of a halted agent: %s", msg)
	}

	r = w.post("/v1/agents/beta/guardrails/reset", `{"guardrail": "session_usd"}`)
	w.wantStatus(r, http.StatusConflict)
	m := r.json(t)
	if m["spent_usd"] != 1.0 || m["ceiling_usd"] != 1.0 || m["min_add_budget_usd"] != 0.01 || m["guardrail"] != "session_usd" {
		t.Fatalf("409 lacks the numbers: %s", r.body)
	}
	if msg := r.errorText(t); !strings.Contains(msg, "would trip again") {
		t.Fatalf("409 error %q", msg)
	}

	r = w.post("/v1/agents/beta/guardrails/reset", `{"guardrail": "bogus"}`)
	w.wantStatus(r, http.StatusBadRequest)
	r = w.post("/v1/agents/beta/guardrails/reset", `{"add_budget_usd": 1}`)
	w.wantStatus(r, http.StatusBadRequest)
	r = w.post("/v1/agents/beta/guardrails/reset", `{"guardrail": "session_usd", "add_budget_usd": -1}`)
	w.wantStatus(r, http.StatusBadRequest)

	r = w.post("/v1/agents/beta/guardrails/reset", `{"guardrail": "session_usd", "add_budget_usd": 2}`)
	w.wantStatus(r, http.StatusOK)
	if m := r.json(t); m["cleared"] != true || m["ceiling_usd"] != 3.0 || m["spent_usd"] != 1.0 {
		t.Fatalf("reset %s", r.body)
	}
	wait.For(t, "beta reopened", func() bool { return w.agent("beta").State() == driver.Sleeping })
}

func TestOperatorVerbs(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	r := w.post("/v1/agents/alpha/pause", "")
	w.wantStatus(r, http.StatusOK)
	if m := r.json(t); m["ok"] != true || m["state"] != "paused" || m["verb"] != "pause" {
		t.Fatalf("pause %s", r.body)
	}
	r = w.post("/v1/agents/alpha/wake", `{"message": "now"}`)
	w.wantStatus(r, http.StatusConflict)
	if msg := r.errorText(t); !strings.Contains(msg, "paused") {
		t.Fatalf("wake of a paused agent: %s", msg)
	}
	w.wantStatus(w.post("/v1/agents/alpha/messages", `{"text": "queued while paused"}`), http.StatusAccepted)
	if n := w.models["alpha"].Calls(); n != 0 {
		t.Fatalf("a paused agent ran %d model calls", n)
	}
	r = w.post("/v1/agents/alpha/resume", `{"message": "catch up"}`)
	w.wantStatus(r, http.StatusOK)
	e := w.waitEvent("alpha", "turn-started")
	if e.Data["messages"] != 1 {
		t.Fatalf("resumed turn took %v messages", e.Data["messages"])
	}
	w.waitEvent("alpha", "turn-completed")
	w.waitTurnDone("alpha")

	r = w.post("/v1/agents/alpha/interrupt", `{"hold": false}`)
	w.wantStatus(r, http.StatusOK)
	if m := r.json(t); m["state"] != "sleeping" || m["turn_running"] != false {
		t.Fatalf("interrupt without hold %s", r.body)
	}
	r = w.post("/v1/agents/alpha/interrupt", "")
	w.wantStatus(r, http.StatusOK)
	if m := r.json(t); m["state"] != "paused" {
		t.Fatalf("interrupt holds by default: %s", r.body)
	}
	r = w.post("/v1/agents/alpha/interrupt", `{"hold": "yes"}`)
	w.wantStatus(r, http.StatusBadRequest)
	r = w.post("/v1/agents/alpha/pause", `{"message": "pause takes none"}`)
	w.wantStatus(r, http.StatusBadRequest)
}

func TestScheduleRun(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	r := w.post("/v1/agents/alpha/schedules/weekly/run", "")
	w.wantStatus(r, http.StatusNotFound)
	if msg := r.errorText(t); !strings.Contains(msg, "weekly") {
		t.Fatalf("404 %s", msg)
	}
	r = w.post("/v1/agents/alpha/schedules/nightly/run", "")
	w.wantStatus(r, http.StatusAccepted)
	if m := r.json(t); m["queued"] != true || m["schedule"] != "nightly" || m["next_fire"] == nil {
		t.Fatalf("run %s", r.body)
	}
	w.waitEvent("alpha", "turn-completed")

	w.wantStatus(w.post("/v1/agents/alpha/pause", ""), http.StatusOK)
	r = w.post("/v1/agents/alpha/schedules/nightly/run", "")
	w.wantStatus(r, http.StatusConflict)
	if msg := r.errorText(t); !strings.Contains(msg, "paused") {
		t.Fatalf("409 %s", msg)
	}
}

func TestAgentView(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 700)
	a := alpha()
	a.script = []config.ScriptStep{scripted.Text(long, 1200, 80)}
	w := newWorld(t, api.Options{}, a, beta())
	w.wantStatus(w.post("/v1/agents/alpha/messages", `{"text": "hello"}`), http.StatusAccepted)
	w.waitEvent("alpha", "turn-completed")
	w.waitTurnDone("alpha")

	var v api.AgentView
	r := w.get("/v1/agents/alpha")
	w.wantStatus(r, http.StatusOK)
	decode(t, r.body, &v)
	if v.Name != "alpha" || v.State != "sleeping" || v.Turns != 1 || v.SubagentsRunning != 0 || v.Model != "fake-1" {
		t.Fatalf("view %s", r.body)
	}
	next := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
	if len(v.Schedules) != 1 || v.Schedules[0].Name != "nightly" || v.Schedules[0].NextFire == nil || !v.Schedules[0].NextFire.Equal(next) {
		t.Fatalf("schedules %+v", v.Schedules)
	}
	if v.NextWake == nil || !v.NextWake.Equal(next) || v.NextWakeCause != "schedule" || v.NextWakeSchedule != "nightly" {
		t.Fatalf("next wake %v %q %q", v.NextWake, v.NextWakeCause, v.NextWakeSchedule)
	}
	l := v.LastTurn
	if l == nil || l.Outcome != "completed" || l.TokensIn != 1200 || l.TokensOut != 80 || l.ModelCalls != 1 || l.Messages != 1 {
		t.Fatalf("last turn %+v", l)
	}
	if n := utf8.RuneCountInString(l.Text); n != api.MaxTurnText || !strings.HasSuffix(l.Text, "…") {
		t.Fatalf("last turn text has %d runes", n)
	}
	if v.Guardrails == nil || v.Guardrails.Session.CeilingUSD != 100 || v.Guardrails.Priced {
		t.Fatalf("guardrails %+v", v.Guardrails)
	}
	if v.Schedules[0].Skipped || strings.Contains(v.NextWakeReason, "skipped") {
		t.Fatalf("an open agent's schedule marked skipped: %+v %q", v.Schedules, v.NextWakeReason)
	}
	// Paused, its next tick runs no turn: the view says so.
	w.wantStatus(w.post("/v1/agents/alpha/pause", `{}`), http.StatusOK)
	var paused api.AgentView
	r = w.get("/v1/agents/alpha")
	decode(t, r.body, &paused)
	if !paused.Schedules[0].Skipped || !strings.Contains(paused.NextWakeReason, "(skipped: the agent is paused)") {
		t.Fatalf("a paused agent's next tick: %+v %q", paused.Schedules, paused.NextWakeReason)
	}
	w.wantStatus(w.post("/v1/agents/alpha/resume", `{}`), http.StatusOK)

	var list struct{ Agents []api.AgentView }
	decode(t, w.get("/v1/agents").body, &list)
	if len(list.Agents) != 2 || list.Agents[0].Name != "alpha" || list.Agents[1].Name != "beta" {
		t.Fatalf("list %+v", list)
	}
}

func TestNewRefusesNetworkListenWithoutTokens(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	cases := []struct {
		listen string
		tokens []api.Token
		ok     bool
	}{
		{"0.0.0.0:8080", nil, false},
		{":8080", nil, false},
		{"[::]:8080", nil, false},
		{"10.1.2.3:8080", nil, false},
		{"api.example.com:8080", nil, false},
		{"0.0.0.0:8080", tokens[:1], true},
		{"127.0.0.1:8080", nil, true},
		{"127.9.9.9:0", nil, true},
		{"[::1]:8080", nil, true},
		{"localhost:8080", nil, true},
		{"", nil, true}, // the default is loopback
	}
	for _, c := range cases {
		_, err := api.New(api.Options{Listen: c.listen, Tokens: c.tokens, Driver: w.driver})
		if c.ok {
			if err != nil {
				t.Errorf("%q with %d tokens: %v", c.listen, len(c.tokens), err)
			}
			continue
		}
		if !errors.Is(err, api.ErrNoToken) || !strings.Contains(err.Error(), "api.listen") || !strings.Contains(err.Error(), "api.tokens") {
			t.Errorf("%q without tokens: %v", c.listen, err)
		}
	}
	for _, bad := range []api.Token{{Name: "x", Role: api.RoleRead}, {Name: "x", Role: "admin", Value: "v"}} {
		if _, err := api.New(api.Options{Tokens: []api.Token{bad}, Driver: w.driver}); !errors.Is(err, api.ErrBadToken) {
			t.Errorf("token %+v: %v", bad.Role, err)
		}
	}
}

func TestServeAndShutdown(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	s, err := api.New(api.Options{Listen: "127.0.0.1:0", Driver: w.driver, Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.ListenAndServe() }()
	wait.For(t, "listening", func() bool { return s.Addr() != "" })
	resp, err := http.Get("http://" + s.Addr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz %d", resp.StatusCode)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-served:
		if !errors.Is(err, http.ErrServerClosed) {
			t.Fatalf("ListenAndServe returned %v", err)
		}
	case <-time.After(deadline):
		t.Fatal("ListenAndServe did not return after Shutdown")
	}

	// Serve refuses a listener beyond loopback without a token.
	open, err := api.New(api.Options{Driver: w.driver})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := open.Serve(l); !errors.Is(err, api.ErrNoToken) {
		t.Fatalf("Serve on %s without tokens: %v", l.Addr(), err)
	}
}

func TestAgentViewShowsAFailedTurnsRetry(t *testing.T) {
	t.Parallel()
	a := alpha()
	a.script = []config.ScriptStep{{Error: "the model answered nonsense"}, scripted.Text("fine", 10, 1)}
	w := newWorld(t, api.Options{}, a)
	w.wantStatus(w.post("/v1/agents/alpha/messages", `{"text": "hello"}`), http.StatusAccepted)
	w.waitEvent("alpha", "turn-failed")
	var v api.AgentView
	wait.For(t, "the retry in the view", func() bool {
		decode(t, w.get("/v1/agents/alpha").body, &v)
		return v.NextWakeCause == "retry"
	})
	if v.NextWakeReason != "retry after failure" || v.FailedTurns != 1 || v.InboxPending != 1 || v.NextWake == nil {
		t.Fatalf("view after a failed turn: %+v", v)
	}
	w.clock.Advance(time.Minute) // the retry comes by itself
	w.waitEvent("alpha", "turn-completed")
}
