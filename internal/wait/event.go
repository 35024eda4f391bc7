package wait

import (
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/events"
)

// Event reads sub until match accepts an event and returns that event;
// match sees every event read, in order, and the ones it refuses are
// consumed. At the deadline it fails the test with t.Fatalf naming what
// ("a turn-completed event"). It blocks on the subscription, not a poll.
func Event(t testing.TB, within time.Duration, sub *events.Subscription, what string, match func(events.Event) bool) events.Event {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case e := <-sub.C:
			if match(e) {
				return e
			}
		case <-timeout:
			t.Fatalf("timed out after %v waiting for %s", within, what)
			return events.Event{}
		}
	}
}

// OfType matches the events of type typ.
func OfType(typ string) func(events.Event) bool {
	return func(e events.Event) bool { return e.Type == typ }
}
