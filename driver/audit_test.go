package driver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// TestPauseRecordKeepsWhoWhyAndSince: a pause stores who paused the agent,
// why and since when; a restarted driver restores all three (not only the
// pause), a second pause changes none of them, and the paused event
// carries who and why. On the old code the record held only the time of
// its last write, and nothing said who paused.
func TestPauseRecordKeepsWhoWhyAndSince(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(epoch)
	st := memstore.New(c)
	a, sub := restart(t, st, c)
	wait.For(t, "restore", func() bool { a.mu.Lock(); defer a.mu.Unlock(); return a.gate.restored })
	if !a.PauseAs(hook.Audit{By: "alice", Reason: "db migration"}) {
		t.Fatal("PauseAs of a running agent reported no change")
	}
	c.Advance(time.Minute)
	if a.PauseAs(hook.Audit{By: "bob", Reason: "other"}) {
		t.Fatal("pausing a paused agent reported a change")
	}
	want := PauseInfo{Since: epoch, By: "alice", Reason: "db migration"}
	if p, ok := a.PauseInfo(); !ok || !p.Since.Equal(want.Since) || p.By != want.By || p.Reason != want.Reason {
		t.Fatalf("pause info %+v, %v; want %+v", p, ok, want)
	}
	var stored PauseInfo
	if found, err := store.GetJSON(context.Background(), st, "agent.tester.paused", &stored); err != nil || !found ||
		stored.By != "alice" || stored.Reason != "db migration" || !stored.Since.Equal(epoch) {
		t.Fatalf("stored pause %+v (found %v, %v)", stored, found, err)
	}
	for timeout := time.After(deadline); ; {
		var e events.Event
		select {
		case e = <-sub.C:
		case <-timeout:
			t.Fatal("no paused event")
		}
		if e.Type == events.Paused {
			if e.Data["by"] != "alice" || e.Data["reason"] != "db migration" || !e.Time.Equal(epoch) {
				t.Fatalf("paused event %+v", e)
			}
			break
		}
	}

	c.Advance(time.Hour)
	b, _ := restart(t, st, c)
	wait.For(t, "restored pause", func() bool { return b.State() == Paused })
	if p, ok := b.PauseInfo(); !ok || !p.Since.Equal(epoch) || p.By != "alice" || p.Reason != "db migration" {
		t.Fatalf("restored pause info %+v, %v", p, ok)
	}

	// Interrupt with hold on an agent that is not paused stores a pause
	// by its caller too; resume clears it.
	if _, err := b.ResumeAs(hook.Audit{By: "carol"}, "", false); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.PauseInfo(); ok {
		t.Fatal("resumed, still paused")
	}
	b.InterruptAs(hook.Audit{By: "dave", Reason: "runaway"}, true)
	if p, ok := b.PauseInfo(); !ok || p.By != "dave" || p.Reason != "runaway" || !p.Interrupt {
		t.Fatalf("pause info after interrupt-and-hold %+v, %v", p, ok)
	}
}

// TestQueuedListsAndResumeDropsEveryQueuedMessage: Queued lists what waits
// (ids, kinds, sources, sizes, ages) without taking it; ResumeAs with
// dropQueued dead-letters each message of the log with reason
// operator_dropped and stores the cursors that pass them, emits a
// message-dropped event naming who, counts them, and the resumed turn
// sees none of them; a message sent after the resume runs. On the old
// code there was no way to abandon them: the resumed turn ran every one.
func TestQueuedListsAndResumeDropsEveryQueuedMessage(t *testing.T) {
	t.Parallel()
	log := newMemLog()
	h := newHarnessWith(t, []config.ScriptStep{text("ok")}, withLog(log))
	h.a.PauseAs(hook.Audit{By: "alice"})
	for i, m := range []inbox.Message{wakeMsg("stale alert one"), wakeMsg("stale alert two"), deferredMsg("stale note")} {
		m.ID = []string{"m-1", "m-2", "m-3"}[i]
		log.add(h.a, m)
	}
	wait.For(t, "three read from the log", func() bool { w, d := h.a.inbox.Len(); return w+d == 3 })
	h.clock.Advance(90 * time.Second)
	q := h.a.Queued()
	if len(q) != 3 {
		t.Fatalf("queued %+v", q)
	}
	for i, m := range q {
		if m.ID != []string{"m-1", "m-2", "m-3"}[i] || m.Source != "test" || m.SizeBytes <= 0 || m.AgeSeconds != 90 {
			t.Fatalf("queued[%d] = %+v", i, m)
		}
	}
	if q[0].Kind != string(inbox.Wake) || q[2].Kind != string(inbox.Deferred) {
		t.Fatalf("kinds %+v", q)
	}
	if w, d := h.a.inbox.Len(); w != 2 || d != 1 {
		t.Fatalf("listing took messages: %d wake, %d deferred left", w, d)
	}

	dropped, err := h.a.ResumeAs(hook.Audit{By: "alice", Reason: "stale alerts"}, "start afresh", true)
	if err != nil || dropped != 3 {
		t.Fatalf("ResumeAs dropped %d, %v; want 3", dropped, err)
	}
	if dl := log.deadLetters(); len(dl) != 3 || dl[0].reason != inbox.RejectOperatorDropped || dl[2].id != "m-3" {
		t.Fatalf("dead letters %+v, want m-1, m-2, m-3 with %s", dl, inbox.RejectOperatorDropped)
	}
	h.waitEvent(events.TurnCompleted)
	if p := h.prompt(1); strings.Contains(p, "stale") || !strings.Contains(p, "start afresh") {
		t.Fatalf("the resumed turn saw a dropped message or lacks the instruction:\n%s", p)
	}
	// The drops are announced after the gate opens: on a busy machine the
	// resumed turn can complete first.
	for h.count(events.MessageDropped) < 3 {
		h.waitEvent(events.MessageDropped)
	}
	ids := map[string]bool{}
	for _, e := range h.seen {
		if e.Type != events.MessageDropped {
			continue
		}
		if e.Data["reason"] != inbox.RejectOperatorDropped || e.Data["by"] != "alice" || e.Data["operator_reason"] != "stale alerts" || e.Data["dead_lettered"] != true {
			t.Fatalf("message-dropped event %v", e.Data)
		}
		ids[e.Data["id"].(string)] = true
	}
	if len(ids) != 3 {
		t.Fatalf("message-dropped events for %v, want m-1, m-2, m-3", ids)
	}
	for _, e := range h.seen {
		if e.Type == events.Resumed && (e.Data["dropped_queued"] != 3 || e.Data["by"] != "alice") {
			t.Fatalf("resumed event %v", e.Data)
		}
	}
	h.waitIdle()
	// The cursors pass the dropped messages: a next owner never reads them.
	if log.cursor("in") < 2 || log.cursor("def") < 3 {
		t.Fatalf("cursors after the drop: in %d, def %d; want 2 and 3", log.cursor("in"), log.cursor("def"))
	}
	log.add(h.a, wakeMsg("fresh alert"))
	h.waitEvent(events.TurnCompleted)
	if p := h.prompt(2); !strings.Contains(p, "fresh alert") {
		t.Fatalf("a message after the resume did not run:\n%s", p)
	}
}
