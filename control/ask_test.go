package control_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// An ask sent to a replica that does not own the agent is answered by the
// owner — its model, its history, named in the reply — and the forward
// waits for the answer beyond the control timeout (here far shorter than
// any answer). A halted agent's refusal comes back the same way, naming
// the guardrail with the owner's numbers; no model is called for it.
func TestAskIsAnsweredByTheOwner(t *testing.T) {
	t.Parallel()
	url := runNATS(t)
	a := newReplica(t, url, "replica-a", true, "alpha", "beta")
	b := newReplicaWith(t, url, "replica-b", true, func(o *control.Options) { o.Timeout = time.Nanosecond })
	ctx := t.Context()
	alpha := a.agent(t, "alpha")
	alpha.Send(inbox.Message{Kind: inbox.Wake, Text: "db-1 disk at 95%", Source: "test"})
	wait.For(t, "the owner's first turn", func() bool { return alpha.Status().Turns == 1 && alpha.State() == driver.Sleeping })

	r, err := b.ctl.Do(as(ctx, "ops"), "alpha", control.Request{Verb: control.VerbAsk, Question: "why did you page me?", By: "ops"})
	var ans control.AskAnswer
	if err != nil || r.Status() != http.StatusOK || r.Owner != "replica-a" || json.Unmarshal(r.Result, &ans) != nil {
		t.Fatalf("ask through a standby: %+v, %v", r, err)
	}
	if ans.Text != "done by replica-a" || ans.Owner != "replica-a" || ans.HistoryTurns != 1 || ans.TokensIn != 10 || ans.Agent != "alpha" {
		t.Fatalf("answer %s", r.Result)
	}
	if a.models["alpha"].Calls() != 2 || b.models["alpha"].Calls() != 0 || alpha.Status().Turns != 1 {
		t.Fatalf("owner's calls %d, standby's %d, turns %d: want the owner's one turn and one ask",
			a.models["alpha"].Calls(), b.models["alpha"].Calls(), alpha.Status().Turns)
	}

	if err := a.guard.Restore(ctx, "beta"); err != nil {
		t.Fatal(err)
	}
	a.guard.Charge("beta", 2.5) // over the $1 session ceiling: halted
	wait.For(t, "the owner's agent halted", func() bool { return a.agent(t, "beta").State() == driver.Halted })
	r, err = b.ctl.Do(as(ctx, "ops"), "beta", control.Request{Verb: control.VerbAsk, Question: "why are you halted?", By: "ops"})
	var refusal struct {
		Error     string  `json:"error"`
		Guardrail string  `json:"guardrail"`
		Spent     float64 `json:"spent_usd"`
		Ceiling   float64 `json:"ceiling_usd"`
		Tripped   bool    `json:"tripped"`
	}
	if err != nil || r.Status() != http.StatusConflict || json.Unmarshal(r.Result, &refusal) != nil {
		t.Fatalf("ask of a halted agent: %+v, %v", r, err)
	}
	if refusal.Guardrail != guard.Session || refusal.Spent != 2.5 || refusal.Ceiling != 1 || !refusal.Tripped || !strings.Contains(refusal.Error, "halted") {
		t.Fatalf("refusal %s", r.Result)
	}
	if a.models["beta"].Calls() != 0 {
		t.Fatal("the halted agent's model was called")
	}
	r, err = b.ctl.Do(as(ctx, "ops"), "alpha", control.Request{Verb: control.VerbAsk, By: "ops"})
	if err != nil || r.Status() != http.StatusBadRequest {
		t.Fatalf("ask without a question: %+v, %v", r, err)
	}
}
