package driver

import (
	"time"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/journal"
)

// host adapts an Agent to tools.Host.
type host struct{ a *Agent }

func (h host) Now() time.Time { return h.a.clock.Now() }

func (h host) RequestWake(at time.Time, reason string) {
	h.a.mu.Lock()
	h.a.requested = &wakeRequest{at: at, reason: reason}
	h.a.mu.Unlock()
}

// ActionID names the running turn's tool call call: the same when the
// turn is resumed from its journal (journal.ActionID).
func (h host) ActionID(call string) string {
	a := h.a
	turn, ok := uint64(0), false
	if a.jr != nil {
		turn, ok = a.jr.turn()
	}
	if !ok {
		a.mu.Lock()
		if a.current != nil {
			turn = a.current.n
		}
		a.mu.Unlock()
	}
	return journal.ActionID(a.spec.Name, turn, call)
}

func (h host) ReportDone(summary string, details map[string]any) {
	h.a.log.Info("task reported done", "summary", summary)
	h.a.emit(events.ReportDone, map[string]any{"summary": summary, "details": details})
}
