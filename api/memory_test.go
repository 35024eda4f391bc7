package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/models/scripted"
)

// keeper is an agent with memory on: every turn leaves the window of
// history_turns 5 five turns later, and a forced fold takes in all.
func keeper() agentDef {
	return agentDef{name: "keeper", model: "fake-1", script: []config.ScriptStep{scripted.Text("noted", 100, 10)},
		memory: driver.MemorySpec{Enabled: true, MaxTokens: 500}}
}

func (w *world) del(path, body string) reply {
	ct := ""
	if body != "" {
		ct = "application/json"
	}
	return w.call(http.MethodDelete, path, operateToken, ct, body)
}

// GET shows the memory, POST .../compact folds every turn (202, then the
// view shows it), DELETE clears it on behalf of the token's name (the
// memory-cleared event says who and why); bad input is a 4xx JSON error.
func TestMemoryRoutes(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{}, alpha(), keeper())
	k := w.agent("keeper")
	k.Send(inbox.Message{Kind: inbox.Wake, Text: "the database failover is scheduled for sunday", Source: "test"})
	wait.For(w.t, "the first turn", func() bool { return k.Status().Turns == 1 && k.State() == driver.Sleeping })

	r := w.get("/v1/agents/keeper/memory")
	w.wantStatus(r, http.StatusOK)
	if m := r.json(t); m["enabled"] != true || m["text"] != "" || m["unfolded_turns"] != float64(0) || m["max_tokens"] != float64(500) {
		t.Fatalf("memory before any fold: %s", r.body)
	}

	w.wantStatus(w.call(http.MethodPost, "/v1/agents/keeper/memory/compact", readToken, "", ""), http.StatusForbidden)
	for _, bad := range []string{`{`, `{"bogus": 1}`, `{"reason": "` + strings.Repeat("x", 600) + `"}`} {
		r := w.post("/v1/agents/keeper/memory/compact", bad)
		w.wantStatus(r, http.StatusBadRequest)
		r.errorText(t)
	}
	r = w.post("/v1/agents/keeper/memory/compact", `{"reason": "shrink the context"}`)
	w.wantStatus(r, http.StatusAccepted)
	wait.For(w.t, "the forced fold", func() bool {
		m := w.get("/v1/agents/keeper/memory").json(t)
		return m["turns_folded"] == float64(1)
	})
	m := w.get("/v1/agents/keeper/memory").json(t)
	if !strings.Contains(m["text"].(string), "the database failover is scheduled for sunday") || m["tokens"].(float64) <= 0 ||
		m["through"] != float64(1) || m["updated"] == nil || m["last_error"] != nil {
		t.Fatalf("memory after the fold: %v", m)
	}

	r = w.del("/v1/agents/keeper/memory", `{"reason": "stale facts"}`)
	w.wantStatus(r, http.StatusOK)
	if m := r.json(t); m["text"] != "" || m["cleared_by"] != "ops" || m["turns_folded"] != float64(0) {
		t.Fatalf("after DELETE: %s", r.body)
	}
	end := time.After(deadline)
	for found := false; !found; {
		select {
		case e := <-w.sub.C:
			if e.Type == events.MemoryCleared {
				if e.Data["by"] != "ops" || e.Data["reason"] != "stale facts" || e.Agent != "keeper" {
					t.Fatalf("memory-cleared %+v", e)
				}
				found = true
			}
		case <-end:
			t.Fatal("no memory-cleared event")
		}
	}

	for _, c := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/v1/agents/ghost/memory", http.StatusNotFound},
		{http.MethodDelete, "/v1/agents/ghost/memory", http.StatusNotFound},
		{http.MethodPost, "/v1/agents/alpha/memory/compact", http.StatusConflict}, // memory off
	} {
		r := w.call(c.method, c.path, operateToken, "", "")
		w.wantStatus(r, c.want)
		r.errorText(t)
	}
	w.wantStatus(w.call(http.MethodDelete, "/v1/agents/keeper/memory", readToken, "", ""), http.StatusForbidden)
}
