package control_test

import (
	"strings"
	"testing"

	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// nextEvent returns the next event of type typ on sub.
func nextEvent(t *testing.T, sub *events.Subscription, typ string) events.Event {
	t.Helper()
	return wait.Event(t, deadline, sub, "a "+typ+" event", wait.OfType(typ))
}

// TestVerbsNameWhoAskedAcrossReplicas: a verb forwarded from a replica
// that does not own the agent keeps its caller and reason, so the owner's
// events and stored pause name the original caller (not the forwarding
// replica); a request sent on the control subject without a token (no
// tokens configured, NATS on loopback) is by "anonymous"; a reason
// longer than MaxReason is cut. The inbox verb lists the owner's queued messages and resume with drop_queued
// abandons them, counted in the reply. On the old code requests carried
// no caller, reason or drop_queued, and there was no inbox verb.
func TestVerbsNameWhoAskedAcrossReplicas(t *testing.T) {
	t.Parallel()
	url := runNATS(t)
	a := newReplica(t, url, "replica-a", true, "alpha", "beta")
	b := newReplica(t, url, "replica-b", true)
	nc := connect(t, url)
	ctx := t.Context()
	sub := a.driver.Events().Subscribe(1000, nil)
	defer sub.Close()
	alpha := a.agent(t, "alpha")

	r, err := b.ctl.Do(as(ctx, "alice"), "alpha", control.Request{Verb: control.VerbPause, By: "alice", Reason: "db migration"})
	if err != nil || !r.OK || r.Owner != "replica-a" {
		t.Fatalf("pause via b: %+v, %v", r, err)
	}
	if e := nextEvent(t, sub, events.Paused); e.Data["by"] != "alice" || e.Data["reason"] != "db migration" {
		t.Fatalf("paused event on the owner %v", e.Data)
	}
	if p, ok := alpha.PauseInfo(); !ok || p.By != "alice" || p.Reason != "db migration" {
		t.Fatalf("owner's pause %+v, %v", p, ok)
	}

	for _, text := range []string{"stale one", "stale two"} {
		alpha.Send(inbox.Message{Kind: inbox.Wake, ID: text, Text: text, Source: "test"})
	}
	r, err = b.ctl.Do(as(ctx, "ops"), "alpha", control.Request{Verb: control.VerbInbox})
	if err != nil || !r.OK || r.Owner != "replica-a" {
		t.Fatalf("inbox via b: %+v, %v", r, err)
	}
	if s := string(r.Result); !strings.Contains(s, `"id":"stale one"`) || !strings.Contains(s, `"id":"stale two"`) || !strings.Contains(s, `"inbox_pending":2`) {
		t.Fatalf("inbox listing %s", s)
	}

	long := strings.Repeat("é", control.MaxReason+10)
	reply, err := request(t, nc, "alpha", control.Request{Verb: control.VerbResume, DropQueued: true, Reason: long}, deadline)
	if err != nil || !reply.OK || reply.Dropped == nil || *reply.Dropped != 2 {
		t.Fatalf("resume with drop_queued on the control subject: %+v, %v", reply, err)
	}
	e := nextEvent(t, sub, events.Resumed)
	if e.Data["by"] != control.ByAnonymous || e.Data["reason"] != strings.Repeat("é", control.MaxReason) || e.Data["dropped_queued"] != 2 {
		t.Fatalf("resumed event %v", e.Data)
	}
	// Everything queued was dropped: the resume has nothing to do and
	// calls no model.
	if e := nextEvent(t, sub, events.TurnSkipped); e.Data["reason"] != driver.SkipNothingToDo {
		t.Fatalf("turn-skipped %v", e.Data)
	}
	if s := alpha.Status(); s.InboxPending != 0 || s.Turns != 0 {
		t.Fatalf("after a resume that dropped everything: %+v", s)
	}
	if n := alpha.Status().InboxPending; n != 0 {
		t.Fatalf("%d messages left after drop_queued", n)
	}

	if r, err := b.ctl.Do(as(ctx, "bob"), "alpha", control.Request{Verb: control.VerbInterrupt, By: "bob"}); err != nil || !r.OK {
		t.Fatalf("interrupt via b: %+v, %v", r, err)
	}
	if e := nextEvent(t, sub, events.Interrupted); e.Data["by"] != "bob" {
		t.Fatalf("interrupted event %v", e.Data)
	}
	if r, err := b.ctl.Do(as(ctx, "bob"), "alpha", control.Request{Verb: control.VerbResume, By: "bob", Message: "carry on"}); err != nil || !r.OK || r.Dropped != nil {
		t.Fatalf("resume via b: %+v, %v", r, err)
	}
	wait.For(t, "the resumed turn", func() bool { return alpha.Status().Turns == 1 && alpha.State() == driver.Sleeping })
	if r, err := b.ctl.Do(as(ctx, "carol"), "alpha", control.Request{Verb: control.VerbWake, By: "carol", Reason: "check now"}); err != nil || !r.OK {
		t.Fatalf("wake via b: %+v, %v", r, err)
	}
	for {
		e := nextEvent(t, sub, events.Wake)
		if e.Data["by"] == "carol" {
			if e.Data["reason"] != "check now" || e.Data["source"] != string(driver.SourceOperator) {
				t.Fatalf("wake event %v", e.Data)
			}
			break
		}
	}
}
