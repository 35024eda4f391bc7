package api_test

import (
	"testing"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// TestResumeOfAnAgentNotPausedIsAConflict: POST /v1/agents/{name}/resume
// of a sleeping agent is 409 with its state and runs no turn; of a paused
// agent it is 200 and runs one.
func TestResumeOfAnAgentNotPausedIsAConflict(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	alpha := w.agent("alpha")

	// A turn has run: the agent is restored from the store and sleeping.
	w.wantStatus(w.post("/v1/agents/alpha/wake", `{"message": "check the queue"}`), 200)
	w.waitTurnDone("alpha")

	r := w.post("/v1/agents/alpha/resume", `{"message": "carry on"}`)
	w.wantStatus(r, 409)
	m := r.json(t)
	want := `agent "alpha" is not paused (state sleeping): nothing to resume; use wake to run a turn`
	if m["state"] != string(driver.Sleeping) || m["error"] != want || m["ok"] != false {
		t.Fatalf("409 says %s, want state sleeping and %q", r.body, want)
	}
	if s := alpha.Status(); s.PendingWakes != 0 || s.State != driver.Sleeping || s.Turns != 1 {
		t.Fatalf("after a refused resume: %+v, want no wake queued", s)
	}

	w.wantStatus(w.post("/v1/agents/alpha/pause", `{}`), 200)
	r = w.post("/v1/agents/alpha/resume", `{"message": "carry on"}`)
	w.wantStatus(r, 200)
	if m := r.json(t); m["ok"] != true {
		t.Fatalf("resume of a paused agent: %s", r.body)
	}
	wait.For(t, "the resumed turn", func() bool { return alpha.Status().Turns == 2 })
}
