package driver

import (
	"strings"
	"testing"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/inbox"
)

func alertMsg(text string) inbox.Message {
	return inbox.Message{Kind: inbox.Wake, Text: text, Source: "nats:agents.tester.inbox", Via: inbox.ViaAlertmanager}
}

// A message that came through the Alertmanager receiver wakes the agent
// with its own source, and the turn says so.
func TestAlertmanagerMessageWakesWithItsSource(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{text("ok")})
	h.a.Send(alertMsg("Alertmanager notification [FIRING:1]"))
	if e := h.waitEvent(events.Wake); e.Data["source"] != string(SourceAlertmanager) {
		t.Fatalf("wake source %v, want alertmanager", e.Data["source"])
	}
	h.waitEvent(events.TurnCompleted)
	if p := h.prompt(1); !strings.HasPrefix(p, "[wake: Alertmanager notification]") {
		t.Fatalf("prompt:\n%s", p)
	}
	// A Via the driver does not know is an inbox message.
	h.waitIdle()
	m := wakeMsg("hello")
	m.Via = "something-else"
	h.a.Send(m)
	if e := h.waitEvent(events.Wake); e.Data["source"] != string(SourceInbox) {
		t.Fatalf("wake source %v, want inbox", e.Data["source"])
	}
}

// An alertmanager wake is carried by its message, like an inbox one: a
// failing turn retries the message and gives it up, never keeps the wake
// as a task of its own.
func TestFailedAlertmanagerTurnRetriesItsMessage(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []config.ScriptStep{{Error: "the model rejected the request"}})
	h.a.Send(alertMsg("Alertmanager notification [FIRING:1]"))
	for i := 1; i <= MaxAttempts; i++ {
		h.waitEvent(events.TurnFailed)
		h.waitSettled(false)
		if i < MaxAttempts {
			h.clock.Advance(DefaultRetryMax)
		}
	}
	h.waitIdle()
	if s := h.a.Status(); s.NextWake != nil || s.InboxPending != 0 || s.PendingWakes != 0 {
		t.Fatalf("work left after the message was given up: %+v", s)
	}
	if n := h.count(events.MessageDropped); n != 1 {
		t.Fatalf("%d message-dropped events, want 1", n)
	}
	if n := h.count(events.WakeDropped); n != 0 {
		t.Fatalf("%d wake-dropped events: the alertmanager wake was kept as a task", n)
	}
}
