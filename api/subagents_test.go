package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/background"
)

// fakeSubagents is a subagent manager with alpha's subagents sub-1
// (running on r2) and sub-0 (finished).
type fakeSubagents struct {
	mu      sync.Mutex
	stopped []string
}

func (f *fakeSubagents) List(_ context.Context, parent string) ([]background.Info, error) {
	if parent != "alpha" {
		return nil, fmt.Errorf("%w: %q", background.ErrNotParent, parent)
	}
	started := epoch
	return []background.Info{
		{ID: "alpha-sub-1", Task: "scan the logs", State: background.StateRunning, Replica: "r2", Runs: 1, Queued: epoch, Started: &started, SpentUSD: 0.25},
		{ID: "alpha-sub-0", Task: "count", State: background.OutcomeCompleted, Replica: "r1", Runs: 1, Queued: epoch.Add(-time.Hour), SpentUSD: 1},
	}, nil
}

func (f *fakeSubagents) StopBy(_ context.Context, parent, id, by string) error {
	switch {
	case parent != "alpha":
		return fmt.Errorf("%w: %q", background.ErrNotParent, parent)
	case id == "alpha-sub-0":
		return fmt.Errorf("%w: %s completed", background.ErrFinished, id)
	case id != "alpha-sub-1":
		return fmt.Errorf("%w %q", background.ErrUnknown, id)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = append(f.stopped, id+" by "+by)
	return nil
}

func (f *fakeSubagents) Running(parent string) int {
	if parent == "alpha" {
		return 1
	}
	return 0
}

// GET /v1/agents/{name}/subagents (role read) lists an agent's subagents
// with their replica, state, start and spend; POST
// /v1/agents/{name}/subagents/{id}/stop (role operate) stops one, naming
// the token; finished is 409, unknown 404, an agent without subagents
// 404, and a worker without a subagent manager 404.
func TestSubagentRoutes(t *testing.T) {
	t.Parallel()
	subs := &fakeSubagents{}
	const ingestToken = "ingest-secret-55"
	w := newWorld(t, api.Options{Subagents: subs, Tokens: append(tokens[:2:2], api.Token{Name: "hook", Role: api.RoleIngest, Value: ingestToken})})

	r := w.get("/v1/agents/alpha/subagents")
	w.wantStatus(r, http.StatusOK)
	for _, want := range []string{`"agent":"alpha"`, `"running":1`, `"id":"alpha-sub-1"`, `"replica":"r2"`, `"state":"running"`, `"spent_usd":0.25`, `"started":"2026-11-29T10:00:00Z"`, `"state":"completed"`} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("list lacks %s: %s", want, r.body)
		}
	}
	w.wantStatus(w.call(http.MethodGet, "/v1/agents/alpha/subagents", ingestToken, "", ""), http.StatusForbidden)
	w.wantStatus(w.get("/v1/agents/beta/subagents"), http.StatusNotFound)
	w.wantStatus(w.get("/v1/agents/nobody/subagents"), http.StatusNotFound)

	w.wantStatus(w.call(http.MethodPost, "/v1/agents/alpha/subagents/alpha-sub-1/stop", readToken, "", ""), http.StatusForbidden)
	r = w.post("/v1/agents/alpha/subagents/alpha-sub-1/stop", "")
	w.wantStatus(r, http.StatusAccepted)
	if m := r.json(t); m["id"] != "alpha-sub-1" || m["status"] != "stopping" {
		t.Errorf("stop answer %s", r.body)
	}
	if len(subs.stopped) != 1 || subs.stopped[0] != "alpha-sub-1 by operator (token ops)" {
		t.Errorf("stopped %q", subs.stopped)
	}
	r = w.post("/v1/agents/alpha/subagents/alpha-sub-0/stop", "")
	w.wantStatus(r, http.StatusConflict)
	if e := r.errorText(t); !strings.Contains(e, "already finished") {
		t.Errorf("409 says %q", e)
	}
	w.wantStatus(w.post("/v1/agents/alpha/subagents/alpha-sub-9/stop", ""), http.StatusNotFound)
	w.wantStatus(w.post("/v1/agents/beta/subagents/beta-sub-1/stop", ""), http.StatusNotFound)
	if routes := w.srv.Routes(); !strings.Contains(strings.Join(routes, "\n"), "POST /v1/agents/{name}/subagents/{id}/stop") {
		t.Errorf("routes %q", routes)
	}

	none := newWorld(t, api.Options{})
	none.wantStatus(none.get("/v1/agents/alpha/subagents"), http.StatusNotFound)
}
