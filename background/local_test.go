package background_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/background"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/inbox"
)

// Halting the parent (here by hand; a guardrail trip does the same)
// stops its running subagents at once, mid model call; the report says
// why and is taken by the turn that follows the halt's clearing.
func TestParentHaltStopsItsSubagents(t *testing.T) {
	t.Parallel()
	r := newRig(t, []config.ScriptStep{spawn("watch forever"), {Text: "ok"}}, []config.ScriptStep{{Hang: true}}, background.Spec{})
	r.a.Send(inbox.Message{Kind: inbox.Wake, Text: "go", Source: "test"})
	r.waitEvent(background.EventStarted)
	r.a.Halt("operator test halt")
	if f := r.waitEvent(background.EventFinished); f.Data["outcome"] != background.OutcomeStopped {
		t.Fatalf("finished %v", f.Data)
	}
	r.a.ClearHalt()
	if p := r.promptWith(`subagent "boss-sub-1" reported`); !strings.Contains(p, "Subagent boss-sub-1 stopped: parent halted (operator test halt).") {
		t.Fatalf("report turn:\n%s", p)
	}
}

// List shows a running subagent and then its outcome; StopBy names who
// stopped it; a finished or unknown subagent, or an agent without
// subagents, is an error saying so.
func TestListAndStopBy(t *testing.T) {
	t.Parallel()
	r := newRig(t, []config.ScriptStep{spawn("index the wiki"), {Text: "ok"}, {Text: "noted"}, {Text: "noted"}}, []config.ScriptStep{{Hang: true}}, background.Spec{})
	r.a.Send(inbox.Message{Kind: inbox.Wake, Text: "go", Source: "test"})
	r.waitEvent(background.EventStarted)
	list, err := r.m.List(t.Context(), "boss")
	if err != nil || len(list) != 1 || list[0].ID != "boss-sub-1" || list[0].State != background.StateRunning || list[0].Task != "index the wiki" || list[0].Started == nil {
		t.Fatalf("list %+v %v", list, err)
	}
	if err := r.m.StopBy(t.Context(), "boss", "boss-sub-1", "operator (token ops)"); err != nil {
		t.Fatal(err)
	}
	r.waitEvent(background.EventFinished)
	if p := r.reportTurn("boss-sub-1"); !strings.Contains(p, "Subagent boss-sub-1 stopped by operator (token ops).") {
		t.Fatalf("report turn:\n%s", p)
	}
	list, _ = r.m.List(t.Context(), "boss")
	if len(list) != 1 || list[0].State != background.OutcomeStopped || list[0].Finished == nil || list[0].StopRequestedBy != "operator (token ops)" {
		t.Fatalf("list after the stop %+v", list)
	}
	if err := r.m.StopBy(t.Context(), "boss", "boss-sub-1", "x"); !errors.Is(err, background.ErrFinished) {
		t.Fatalf("stop again: %v", err)
	}
	if err := r.m.StopBy(t.Context(), "boss", "boss-sub-2", "x"); !errors.Is(err, background.ErrUnknown) {
		t.Fatalf("stop unknown: %v", err)
	}
	if _, err := r.m.List(t.Context(), "nobody"); !errors.Is(err, background.ErrNotParent) {
		t.Fatalf("list of a non-parent: %v", err)
	}
}

// promptWith waits for a parent turn whose prompt contains s and returns
// it.
func (r *rig) promptWith(s string) string {
	r.t.Helper()
	end := time.Now().Add(deadline)
	for time.Now().Before(end) {
		r.mu.Lock()
		for _, p := range r.prompts {
			if strings.Contains(p, s) {
				r.mu.Unlock()
				return p
			}
		}
		r.mu.Unlock()
		<-time.After(time.Millisecond)
	}
	r.t.Fatalf("no turn with %q", s)
	return ""
}

// A spawn repeated under the same key (a turn resumed from its journal
// spawning again) starts nothing and answers the first subagent's id; a
// spawn under another key, or none, starts another.
func TestSpawnUnderTheSameKeyFindsTheFirst(t *testing.T) {
	t.Parallel()
	r := newRig(t, []config.ScriptStep{{Text: "ok"}}, []config.ScriptStep{{Hang: true}}, background.Spec{Max: 3})
	first, err := r.m.SpawnKeyed("boss", "index the wiki", "boss-t7-call_1")
	if err != nil {
		t.Fatal(err)
	}
	again, err := r.m.SpawnKeyed("boss", "index the wiki", "boss-t7-call_1")
	if err != nil || again != first {
		t.Fatalf("respawn under the same key: %q %v, want %q", again, err, first)
	}
	other, err := r.m.SpawnKeyed("boss", "index the wiki", "boss-t7-call_2")
	if err != nil || other == first {
		t.Fatalf("spawn under another key: %q %v", other, err)
	}
	if n := r.m.Running("boss"); n != 2 {
		t.Fatalf("running %d, want 2 (one per key)", n)
	}
}
