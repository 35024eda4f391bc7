package api

import (
	"sync"
	"time"

	"github.com/agent-worker/agent-worker/clock"
)

// maxRemembered bounds the ids an idWindow holds, so a flood of unique ids
// cannot grow memory without limit; beyond it the oldest are forgotten
// early.
const maxRemembered = 100_000

// idWindow remembers the ids seen per agent for a fixed window.
type idWindow struct {
	clock  clock.Clock
	window time.Duration
	max    int

	mu    sync.Mutex
	seen  map[string]time.Time // key → when first seen
	order []seenID             // oldest first; may hold stale keys
}

type seenID struct {
	key string
	at  time.Time
}

func newIDWindow(c clock.Clock, window time.Duration, max int) *idWindow {
	return &idWindow{clock: c, window: window, max: max, seen: map[string]time.Time{}}
}

// first records id for agent and reports whether it was not already seen
// within the window. Checking and recording are one step, so of two
// concurrent requests with one id exactly one is first.
func (w *idWindow) first(agent, id string) bool {
	key := agent + "\x00" + id
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.expire(now)
	if _, dup := w.seen[key]; dup {
		return false
	}
	w.seen[key] = now
	w.order = append(w.order, seenID{key: key, at: now})
	return true
}

// expire forgets ids older than the window, and the oldest beyond max.
// Callers hold mu.
func (w *idWindow) expire(now time.Time) {
	n := 0
	for ; n < len(w.order); n++ {
		e := w.order[n]
		if now.Sub(e.at) < w.window && len(w.order)-n < w.max {
			break
		}
		if at, ok := w.seen[e.key]; ok && at.Equal(e.at) {
			delete(w.seen, e.key)
		}
	}
	clear(w.order[:n]) // let the keys go before append reallocates
	w.order = w.order[n:]
}
