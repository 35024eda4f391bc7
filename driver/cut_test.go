package driver

import (
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/scheduler"
)

// A turn that reaches turn.timeout after the model answered has been
// charged: it is cut, not retried. Its message is dead-lettered with
// reason turn_cap, its schedule task dropped, and the next turn is told
// what was cut — without the message's text.
func TestTurnTimedOutAfterAResponseIsCutAndTold(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{call("report_done", map[string]any{"summary": "half"}), {Hang: true}, text("fresh")},
		func(s *Spec) { s.TurnTimeout = time.Minute })
	h.a.Send(wakeMsg("PAYLOAD-ONE"))
	h.a.Fire(scheduler.Fire{Kind: scheduler.KindSchedule, Schedule: "digest", Due: h.clock.Now(), Prompt: "Write the digest."})
	h.waitCall()
	h.waitCall() // the second call hangs
	h.clock.Advance(time.Minute)
	if d := h.waitEvent(events.MessageDropped); d.Data["reason"] != inbox.RejectTurnCap || d.Data["dead_lettered"] != false {
		t.Fatalf("message-dropped %v", d.Data)
	}
	if w := h.waitEvent(events.WakeDropped); w.Data["source"] != string(SourceSchedule) || w.Data["reason"] != inbox.RejectTurnCap {
		t.Fatalf("wake-dropped %v", w.Data)
	}
	if f := h.waitEvent(events.TurnFailed); f.Data["outcome"] != OutcomeTimeout {
		t.Fatalf("outcome %v", f.Data)
	}
	h.waitIdle()
	if s := h.a.Status(); s.InboxPending != 0 || s.NextWake != nil {
		t.Fatalf("the cut turn left work to retry: %+v", s)
	}
	h.clock.Advance(24 * time.Hour) // any retry would be due
	h.a.Send(wakeMsg("PAYLOAD-TWO"))
	h.waitEvent(events.TurnCompleted)
	if n := h.modelCalls(); n != 3 {
		t.Fatalf("%d model calls, want 3: the cut turn's two and the next turn's one", n)
	}
	p := h.prompt(3)
	for _, want := range []string{"cut at a per-turn limit (turn.timeout)", "its 1 message(s) were not handled", "scheduled task \"digest\" was dropped", "PAYLOAD-TWO"} {
		if !strings.Contains(p, want) {
			t.Fatalf("next prompt lacks %q:\n%s", want, p)
		}
	}
	if strings.Contains(p, "PAYLOAD-ONE") {
		t.Fatalf("the cut message is shown again:\n%s", p)
	}
}
