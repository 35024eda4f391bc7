package api

import (
	"crypto/sha256"
	"sync"
	"time"

	"github.com/agent-worker/agent-worker/clock"
)

// maxRemembered bounds the keys a window holds, so a flood of unique ids
// cannot grow memory without limit; beyond it the oldest are forgotten
// early.
const maxRemembered = 100_000

// window remembers a value per key for a fixed time after it was last
// set. It is safe for concurrent use.
type window[V any] struct {
	clock clock.Clock
	ttl   time.Duration
	max   int

	mu      sync.Mutex
	entries map[string]entry[V]
	order   []stamp // oldest first; may hold stale keys
}

type entry[V any] struct {
	at time.Time
	v  V
}

type stamp struct {
	key string
	at  time.Time
}

func newWindow[V any](c clock.Clock, ttl time.Duration, max int) *window[V] {
	return &window[V]{clock: c, ttl: ttl, max: max, entries: map[string]entry[V]{}}
}

// first records v for key and reports whether key held nothing. Checking
// and recording are one step, so of two concurrent calls with one key
// exactly one is first.
func (w *window[V]) first(key string, v V) bool {
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.expire(now)
	if _, ok := w.entries[key]; ok {
		return false
	}
	w.putLocked(key, v, now)
	return true
}

// set records v for key, replacing what it held, for a new ttl.
func (w *window[V]) set(key string, v V) {
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.expire(now)
	w.putLocked(key, v, now)
}

func (w *window[V]) putLocked(key string, v V, now time.Time) {
	w.entries[key] = entry[V]{at: now, v: v}
	w.order = append(w.order, stamp{key: key, at: now})
}

// get returns what key holds.
func (w *window[V]) get(key string) (V, bool) {
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.expire(now)
	e, ok := w.entries[key]
	return e.v, ok
}

// forget drops key.
func (w *window[V]) forget(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.entries, key)
}

// expire forgets keys set longer than ttl ago, and the oldest beyond max.
// Callers hold mu.
func (w *window[V]) expire(now time.Time) {
	n := 0
	for ; n < len(w.order); n++ {
		e := w.order[n]
		if now.Sub(e.at) < w.ttl && len(w.order)-n < w.max {
			break
		}
		if cur, ok := w.entries[e.key]; ok && cur.at.Equal(e.at) {
			delete(w.entries, e.key)
		}
	}
	clear(w.order[:n]) // let the keys go before append reallocates
	w.order = w.order[n:]
}

// idWindow remembers the message ids seen per agent for the dedup window.
type idWindow struct{ w *window[struct{}] }

func newIDWindow(c clock.Clock, ttl time.Duration, max int) *idWindow {
	return &idWindow{newWindow[struct{}](c, ttl, max)}
}

func idKey(agent, id string) string { return agent + "\x00" + id }

// first records id for agent and reports whether it was not already seen
// within the window; of two concurrent calls with one id exactly one is
// first.
func (w *idWindow) first(agent, id string) bool { return w.w.first(idKey(agent, id), struct{}{}) }

// forget drops id for agent, so a retry of a message that could not be
// queued is not mistaken for a duplicate.
func (w *idWindow) forget(agent, id string) { w.w.forget(idKey(agent, id)) }

// groupState is an Alertmanager group's last notification: the id its
// content derives (inbox.Body.ID) and the id it was queued or answered
// under (the same, unless the group went back to an earlier state).
type groupState struct {
	content string
	id      string
}

// groupWindow remembers each Alertmanager group's last notification per
// agent.
type groupWindow struct{ w *window[groupState] }

func newGroupWindow(c clock.Clock, ttl time.Duration, max int) *groupWindow {
	return &groupWindow{newWindow[groupState](c, ttl, max)}
}

// groupKey keys a group by a digest of its groupKey, which the payload
// chose and may be long.
func groupKey(agent, key string) string {
	sum := sha256.Sum256([]byte(key))
	return idKey(agent, string(sum[:]))
}

func (g *groupWindow) last(agent, key string) (groupState, bool) {
	return g.w.get(groupKey(agent, key))
}

func (g *groupWindow) set(agent, key string, st groupState) {
	g.w.set(groupKey(agent, key), st)
}
