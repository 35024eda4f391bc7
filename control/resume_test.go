package control_test

import (
	"net/http"
	"testing"

	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// TestResumeOfAnAgentNotPausedIsAConflict: on the control subject, resume
// of a sleeping agent is a 409 that names its state and queues no turn;
// resume of a paused one opens it and runs one.
func TestResumeOfAnAgentNotPausedIsAConflict(t *testing.T) {
	t.Parallel()
	url := runNATS(t)
	a := newReplica(t, url, "replica-a", true, "alpha")
	nc := connect(t, url)
	alpha := a.agent(t, "alpha")

	// A turn has run: the agent is restored from the store and sleeping.
	if r, err := request(t, nc, "alpha", control.Request{Verb: control.VerbWake, Message: "check the queue"}, deadline); err != nil || !r.OK {
		t.Fatalf("wake: %+v, %v", r, err)
	}
	wait.For(t, "the woken turn", func() bool { return alpha.Status().Turns == 1 && alpha.State() == driver.Sleeping })

	r, err := request(t, nc, "alpha", control.Request{Verb: control.VerbResume, Message: "carry on"}, deadline)
	if err != nil {
		t.Fatal(err)
	}
	want := `agent "alpha" is not paused (state sleeping): nothing to resume; use wake to run a turn`
	if r.OK || r.Status() != http.StatusConflict || r.State != string(driver.Sleeping) || r.Error != want {
		t.Fatalf("resume of a sleeping agent: %+v, want 409 in state sleeping saying %q", r, want)
	}
	if s := alpha.Status(); s.PendingWakes != 0 || s.State != driver.Sleeping || s.Turns != 1 {
		t.Fatalf("after a refused resume: %+v, want no wake queued", s)
	}

	if r, err := request(t, nc, "alpha", control.Request{Verb: control.VerbPause}, deadline); err != nil || !r.OK {
		t.Fatalf("pause: %+v, %v", r, err)
	}
	r, err = request(t, nc, "alpha", control.Request{Verb: control.VerbResume, Message: "carry on"}, deadline)
	if err != nil || !r.OK || r.Status() != http.StatusOK {
		t.Fatalf("resume of a paused agent: %+v, %v", r, err)
	}
	wait.For(t, "the resumed turn", func() bool { return alpha.Status().Turns == 2 && alpha.State() == driver.Sleeping })
}
