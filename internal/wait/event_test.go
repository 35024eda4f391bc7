package wait

import (
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/events"
)

func TestEventReturnsTheFirstMatchAndFailsAtTheDeadline(t *testing.T) {
	t.Parallel()
	bus := events.NewBus(16, nil)
	sub := bus.Subscribe(16, nil)
	bus.Publish(events.Event{Type: "turn-started", Agent: "a"})
	bus.Publish(events.Event{Type: "turn-completed", Agent: "b"})
	bus.Publish(events.Event{Type: "turn-completed", Agent: "a"})
	rec := &fatalRecorder{TB: t}
	seen := 0
	e := Event(rec, time.Minute, sub, "a's turn-completed", func(e events.Event) bool {
		seen++
		return e.Type == "turn-completed" && e.Agent == "a"
	})
	if rec.fatal != "" || e.Agent != "a" || seen != 3 {
		t.Fatalf("got %+v after %d events, failure %q; want a's, the third", e, seen, rec.fatal)
	}
	Event(rec, 20*time.Millisecond, sub, "a turn-failed event", OfType("turn-failed"))
	if want := "timed out after 20ms waiting for a turn-failed event"; rec.fatal != want {
		t.Fatalf("Fatalf %q, want %q", rec.fatal, want)
	}
}
