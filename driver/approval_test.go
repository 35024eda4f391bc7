package driver

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/approval"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memory"
)

func needsApproval(s *Spec) {
	withPublish(s)
	s.Approval = []string{"publish"}
	s.ApprovalTTL = time.Hour
}

// heldPublish is an agent whose model calls publish (which needs an
// approval) and then answers; the call is held.
func heldPublish(t *testing.T, st store.Store, pub *publishLog) (*harness, approval.Request) {
	t.Helper()
	report := call("publish", map[string]any{"subject": "ops.restarts", "text": "restart api-7"})
	h := newHarnessWith(t, []config.ScriptStep{report, text("asked"), text("noted")}, publishing(st, pub), needsApproval)
	h.a.Send(wakeMsg("api-7 is stuck"))
	req := h.waitEvent(events.ApprovalRequested)
	h.waitEvent(events.TurnCompleted)
	h.waitIdle()
	if len(pub.published()) != 0 {
		t.Fatal("a call that needs an approval was run")
	}
	list, err := h.a.Approvals(t.Context())
	if err != nil || len(list) != 1 || list[0].ID != req.Data["id"] || list[0].Args["subject"] != "ops.restarts" {
		t.Fatalf("pending %+v %v (event %v)", list, err, req.Data)
	}
	if !hasAwaiting(h) {
		t.Fatal("the model was not told the call awaits an approval")
	}
	return h, list[0]
}

// hasAwaiting reports whether the model's second request carries the
// held answer.
func hasAwaiting(h *harness) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.requests[1].Contents {
		for _, p := range c.Parts {
			if p.FunctionResponse != nil && p.FunctionResponse.Response["status"] == "awaiting_approval" {
				return true
			}
		}
	}
	return false
}

// An approved call runs once, with the stored arguments, and wakes the
// agent with its result; deciding it again is unknown.
func TestAnApprovedCallRunsOnceAndWakesTheAgent(t *testing.T) {
	pub := &publishLog{}
	h, r := heldPublish(t, memory.New(nil), pub)
	got, err := h.a.Decide(t.Context(), r.ID, true, Audit{By: "alice", Reason: "looks right"})
	if err != nil || got.ID != r.ID {
		t.Fatalf("decide: %+v %v", got, err)
	}
	d := h.waitEvent(events.ApprovalDecided)
	if d.Data["decision"] != DecisionApproved || d.Data["by"] != "alice" || d.Data["outcome"] != "ok" {
		t.Fatalf("decided %v", d.Data)
	}
	if n := len(pub.published()); n != 1 {
		t.Fatalf("published %d times, want once", n)
	}
	h.waitEvent(events.TurnCompleted)
	if p := h.prompt(3); !strings.Contains(p, "alice approved your held call publish") || !strings.Contains(p, `"published":true`) {
		t.Fatalf("the wake after the approval:\n%s", p)
	}
	if _, err := h.a.Decide(t.Context(), r.ID, true, Audit{By: "bob"}); !errors.Is(err, approval.ErrUnknown) {
		t.Fatalf("deciding twice: %v", err)
	}
	if len(pub.published()) != 1 {
		t.Fatal("a second decision ran the call again")
	}
}

// A denied call is never run; the agent is told who denied it and why.
func TestADeniedCallIsNotRunAndTheAgentIsTold(t *testing.T) {
	pub := &publishLog{}
	h, r := heldPublish(t, memory.New(nil), pub)
	if _, err := h.a.Decide(t.Context(), r.ID, false, Audit{By: "bob", Reason: "not during the freeze"}); err != nil {
		t.Fatal(err)
	}
	h.waitEvent(events.TurnCompleted)
	if p := h.prompt(3); !strings.Contains(p, "bob denied your held call publish") || !strings.Contains(p, "not during the freeze") {
		t.Fatalf("the wake after the denial:\n%s", p)
	}
	if len(pub.published()) != 0 {
		t.Fatal("a denied call ran")
	}
}

// A pending approval survives a restart: the next process lists it and
// can approve it.
func TestAPendingApprovalSurvivesARestart(t *testing.T) {
	st, pub := memory.New(nil), &publishLog{}
	h, r := heldPublish(t, st, pub)
	h.d.Shutdown(context.Background())
	again := newHarnessWith(t, []config.ScriptStep{text("noted")}, publishing(st, pub), needsApproval)
	list, err := again.a.Approvals(t.Context())
	if err != nil || len(list) != 1 || list[0].ID != r.ID {
		t.Fatalf("after the restart: %+v %v", list, err)
	}
	if _, err := again.a.Decide(t.Context(), r.ID, true, Audit{By: "alice"}); err != nil {
		t.Fatal(err)
	}
	again.waitEvent(events.ApprovalDecided)
	if len(pub.published()) != 1 {
		t.Fatalf("published %d times", len(pub.published()))
	}
}

// An approval nobody decides expires: the call is not run and the agent
// is told.
func TestAnUndecidedApprovalExpires(t *testing.T) {
	pub := &publishLog{}
	h, r := heldPublish(t, memory.New(nil), pub)
	h.clock.Advance(time.Hour + time.Second)
	if d := h.waitEvent(events.ApprovalDecided); d.Data["decision"] != DecisionExpired || d.Data["id"] != r.ID {
		t.Fatalf("decided %v", d.Data)
	}
	h.waitEvent(events.TurnCompleted)
	if p := h.prompt(3); !strings.Contains(p, "was not decided by an operator before it expired") {
		t.Fatalf("the wake after the expiry:\n%s", p)
	}
	if list, _ := h.a.Approvals(t.Context()); len(list) != 0 || len(pub.published()) != 0 {
		t.Fatalf("pending %v, published %v", list, pub.published())
	}
}

// A decision the agent was not told of before its owner stopped is told
// by the next owner, once: the notice stays in the store until a turn that
// told it completes.
func TestADecisionIsToldAfterARestart(t *testing.T) {
	st, pub := memory.New(nil), &publishLog{}
	h, r := heldPublish(t, st, pub)
	h.a.PauseAs(Audit{By: "alice"}) // the decision's wake waits behind the pause
	if _, err := h.a.Decide(t.Context(), r.ID, false, Audit{By: "bob", Reason: "freeze"}); err != nil {
		t.Fatal(err)
	}
	h.d.Shutdown(context.Background()) // before any turn told the agent

	again := newHarnessWith(t, []config.ScriptStep{text("noted")}, publishing(st, pub), needsApproval)
	again.waitSettled(false)
	if _, err := again.a.ResumeAs(Audit{By: "alice"}, "", false); err != nil {
		t.Fatal(err)
	}
	again.waitEvent(events.TurnCompleted)
	if p := again.prompt(1); !strings.Contains(p, "bob denied your held call publish") {
		t.Fatalf("the next owner's turn was not told of the decision:\n%s", p)
	}
	again.waitIdle()
	if n, _ := approval.Notices(t.Context(), st, "tester"); len(n) != 0 {
		t.Fatalf("notices left after a turn told them: %+v", n)
	}
}
