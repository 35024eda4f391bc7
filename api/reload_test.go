package api_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agent-worker/agent-worker/api"
)

// TestReloadRoute: POST /v1/reload needs an unscoped operate token; it
// answers the reload's report: 200 applied, 422 with each file:line
// problem for an invalid file, 409 naming the keys that need a restart,
// and the caller is named to the reloader.
func TestReloadRoute(t *testing.T) {
	t.Parallel()
	const scopedOperate = "scoped-operate-3e1d"
	var mu sync.Mutex
	var answer func() (api.ReloadReport, error)
	var callers []string
	reload := func(_ context.Context, by string) (api.ReloadReport, error) {
		mu.Lock()
		defer mu.Unlock()
		callers = append(callers, by)
		return answer()
	}
	set := func(f func() (api.ReloadReport, error)) { mu.Lock(); answer = f; mu.Unlock() }
	w := newWorld(t, api.Options{Reload: reload, Tokens: append(slices.Clone(tokens),
		api.Token{Name: "alpha-ops", Role: api.RoleOperate, Value: scopedOperate, Agents: []string{"alpha"}})})

	set(func() (api.ReloadReport, error) {
		return api.ReloadReport{Outcome: "applied", Hash: "abc", Previous: "def", Added: []string{"gamma"}, Removed: []string{}, Changed: []string{"alpha"}}, nil
	})
	w.wantStatus(w.call(http.MethodPost, "/v1/reload", readToken, "", ""), http.StatusForbidden)
	w.wantStatus(w.call(http.MethodPost, "/v1/reload", scopedOperate, "", ""), http.StatusForbidden)
	w.wantStatus(w.call(http.MethodPost, "/v1/reload", "", "", ""), http.StatusUnauthorized)
	mu.Lock()
	if len(callers) != 0 {
		t.Fatalf("refused callers reached the reloader: %v", callers)
	}
	mu.Unlock()

	r := w.post("/v1/reload", "")
	w.wantStatus(r, http.StatusOK)
	got := r.json(t)
	if got["outcome"] != "applied" || got["hash"] != "abc" || fmt.Sprint(got["added"]) != "[gamma]" || fmt.Sprint(got["changed"]) != "[alpha]" {
		t.Fatalf("applied: %s", r.body)
	}

	set(func() (api.ReloadReport, error) {
		return api.ReloadReport{Outcome: "refused", Problems: []string{"/etc/aw.yaml:12: agents[0].schedules[0].cron: bad cron"}},
			fmt.Errorf("%w: 1 problem", api.ErrReloadInvalid)
	})
	r = w.post("/v1/reload", "")
	w.wantStatus(r, http.StatusUnprocessableEntity)
	if got := r.json(t); got["outcome"] != "refused" || !strings.Contains(fmt.Sprint(got["problems"]), "/etc/aw.yaml:12: agents[0].schedules[0].cron") {
		t.Fatalf("invalid file: %s", r.body)
	}

	set(func() (api.ReloadReport, error) {
		return api.ReloadReport{Outcome: "refused", Problems: []string{"/etc/aw.yaml:3: api.listen: cannot change without a restart"}},
			fmt.Errorf("%w: 1 problem", api.ErrReloadRestart)
	})
	r = w.post("/v1/reload", "")
	w.wantStatus(r, http.StatusConflict)
	if !strings.Contains(string(r.body), "api.listen: cannot change without a restart") {
		t.Fatalf("restart-only: %s", r.body)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(callers, []string{"ops", "ops", "ops"}) {
		t.Fatalf("the reloader was told callers %v, want the operate token's name thrice", callers)
	}
}
