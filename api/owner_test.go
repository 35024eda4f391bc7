package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/control"
)

// counter reports a fixed number of running subagents per agent.
type counter map[string]int

func (c counter) Running(agent string) int { return c[agent] }

// TestViewNamesItsOwnerAndCountsSubagents: a view names the replica that
// built it (owner) and the one that served it, and counts the agent's
// running subagents from the subagent manager.
func TestViewNamesItsOwnerAndCountsSubagents(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{Holder: "replica-1", Subagents: counter{"alpha": 2}})
	var v api.AgentView
	r := w.get("/v1/agents/alpha")
	w.wantStatus(r, http.StatusOK)
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatal(err)
	}
	if v.SubagentsRunning != 2 || v.Owner != "replica-1" || v.ServedBy != "replica-1" {
		t.Fatalf("view %s", r.body)
	}
	var list struct{ Agents []api.AgentView }
	r = w.get("/v1/agents")
	if err := json.Unmarshal(r.body, &list); err != nil || len(list.Agents) != 2 || list.Agents[0].SubagentsRunning != 2 || list.Agents[1].Owner != "replica-1" {
		t.Fatalf("list %s: %v", r.body, err)
	}
	if page := w.get("/"); !strings.Contains(string(page.body), "on replica-1") || !strings.Contains(string(page.body), "served by replica-1") {
		t.Fatalf("the status page does not name the owner:\n%s", page.body)
	}
}

// ownsNothing is a replica that holds no lease.
type ownsNothing struct{}

func (ownsNothing) Owns(string) bool { return false }

// TestNoOwnerAnswers503: on a replica that owns no agent and can reach
// no owner, every verb and GET /v1/agents/{name} answer 503 with the
// reason and do nothing; the list shows the agents as unknown, never this
// replica's standby state.
func TestNoOwnerAnswers503(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	ctl, err := control.New(control.Options{Driver: w.driver, Guard: w.guard, Owner: ownsNothing{}, Holder: "replica-2"})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Options{Driver: w.driver, Guard: w.guard, Scheduler: w.sched, Tokens: tokens, Control: ctl, Holder: "replica-2", Clock: w.clock})
	if err != nil {
		t.Fatal(err)
	}
	w.ts = httptest.NewServer(srv.Handler())
	t.Cleanup(w.ts.Close)

	for _, c := range []struct{ path, body string }{
		{"/v1/agents/alpha/pause", ""},
		{"/v1/agents/alpha/resume", ""},
		{"/v1/agents/alpha/wake", ""},
		{"/v1/agents/alpha/interrupt", ""},
		{"/v1/agents/beta/guardrails/reset", `{"guardrail": "session_usd", "add_budget_usd": 5}`},
		{"/v1/agents/alpha/schedules/nightly/run", ""},
	} {
		r := w.post(c.path, c.body)
		w.wantStatus(r, http.StatusServiceUnavailable)
		if e := r.errorText(t); !strings.HasPrefix(e, `no replica owns agent "`) || r.header.Get("Retry-After") == "" {
			t.Fatalf("%s: %s", c.path, r.body)
		}
	}
	if w.agent("alpha").Status().Paused {
		t.Fatal("a verb nobody owns was carried out here")
	}
	r := w.get("/v1/agents/alpha")
	w.wantStatus(r, http.StatusServiceUnavailable)
	var list struct{ Agents []api.AgentView }
	r = w.get("/v1/agents")
	if err := json.Unmarshal(r.body, &list); err != nil || len(list.Agents) != 2 {
		t.Fatalf("list %s: %v", r.body, err)
	}
	for _, v := range list.Agents {
		if v.State != api.StateUnknown || v.ServedBy != "replica-2" || !strings.Contains(v.Error, "no replica owns agent") {
			t.Fatalf("agent without an owner listed as %+v", v)
		}
	}
}
