package natsinbox

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/natsbus"
)

// Target is what the log tells of an agent's input; the driver's agent
// is one.
type Target interface {
	// Send hands over a message that only memory holds (core NATS mode).
	Send(inbox.Message)
	// Notify says the agent's log has news: its loop reads it. It must not
	// block.
	Notify()
}

// Agent is one agent as the log needs it.
type Agent struct {
	Name   string
	Target Target
	// Subscribe lists the extra subjects the agent binds.
	Subscribe []config.Subscription
}

// input is one subject or pattern an agent binds — its inbox, its
// deferred subject, or a subscribe: subject — with what the log knows of
// it. Its key (the subject as configured) names the agent's cursor for it.
type input struct {
	agent *agentLog
	key   string
	kind  inbox.Kind
	// seen is the newest sequence the router saw on the input; hint the
	// stream's last sequence when the start found messages on it (a
	// message at or below it may wait). Reads are made only when one is
	// beyond the reader's position.
	seen, hint atomic.Uint64
	// pending is how many messages the last read left behind.
	pending atomic.Uint64
	// lags counts reads in a row that came back behind seen.
	lags atomic.Int32
	// cursor is the agent's cursor on the input as last settled here
	// (owner only); purged the sequence the log is purged below.
	cursor, purged atomic.Uint64
	// dirty: the log may hold messages of the input below its cursor.
	dirty atomic.Bool
	// since is where the agent's reading of the input starts when its
	// stored cursor is below it: the stream's last sequence when a reload
	// bound the input anew (binders.go), 0 for a binding older than that.
	// The agent's cursor on the input counts as max(cursor, since).
	since atomic.Uint64
	// ids holds, oldest first, the messages with a Nats-Msg-Id the router
	// saw on the input within the stream's duplicate window: they are not
	// purged before it passes, so a publisher's retry is recognised as a
	// duplicate even after the server restarts (it rebuilds its duplicate
	// ids from the messages it holds).
	ids recentIDs
	// span is the input's part of the window (window.go).
	span span
}

// recentIDs is a queue of (sequence, time) of messages with ids, in
// sequence order, each sequence once: the router and the reader both note
// the ids they see, in either order.
type recentIDs struct {
	mu sync.Mutex
	q  []seqAt
}

type seqAt struct {
	seq uint64
	at  time.Time
}

// add notes a message with an id at seq, stored at at.
func (r *recentIDs) add(seq uint64, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := len(r.q)
	for i > 0 && r.q[i-1].seq >= seq {
		if r.q[i-1].seq == seq {
			return
		}
		i--
	}
	r.q = slices.Insert(r.q, i, seqAt{seq, at})
}

// oldest forgets the messages stored before since and returns the
// sequence of the oldest one left (0: none).
func (r *recentIDs) oldest(since time.Time) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := 0
	for i < len(r.q) && r.q[i].at.Before(since) {
		i++
	}
	if i > 0 {
		r.q = append(r.q[:0:0], r.q[i:]...)
	}
	if len(r.q) == 0 {
		return 0
	}
	return r.q[0].seq
}

// agentLog is one configured agent's inputs.
type agentLog struct {
	name string
	// target holds a targetRef: a reload may hand the agent a new loop
	// (Binding.Retarget, roster.go).
	target atomic.Value
	owned  atomic.Bool
	// purgeArmed: a purge after the duplicate window is armed (purger).
	purgeArmed atomic.Bool
	inputs     []*input // inbox, deferred, then the subscribe: subjects
	byKey      map[string]*input
	// subscribe is the agent's subscribe: bindings, for core NATS mode.
	subscribe []config.Subscription
}

// newAgentLog lays out a's inputs under subjects.
func newAgentLog(a Agent, subjects natsbus.Subjects) *agentLog {
	al := &agentLog{name: a.Name, byKey: map[string]*input{}, subscribe: a.Subscribe}
	al.target.Store(targetRef{a.Target})
	add := func(key string, kind inbox.Kind) {
		in := &input{agent: al, key: key, kind: kind}
		al.inputs = append(al.inputs, in)
		al.byKey[key] = in
	}
	add(subjects.Inbox(a.Name), inbox.Wake)
	add(subjects.Deferred(a.Name), inbox.Deferred)
	for _, s := range a.Subscribe {
		kind := inbox.Wake
		if s.Mode == "deferred" {
			kind = inbox.Deferred
		}
		add(s.Subject, kind)
	}
	return al
}

// pattern is one subscribe: subject and the inputs of every agent that
// binds it as written.
type pattern struct {
	subject string
	inputs  []*input
}

// layout indexes the agents' inputs: each agent by name, and the
// subscribe: patterns with the inputs that overlap (roster.go).
func layout(agents []Agent, subjects natsbus.Subjects) *roster {
	byName := make(map[string]*agentLog, len(agents))
	for _, a := range agents {
		byName[a.Name] = newAgentLog(a, subjects)
	}
	return newRoster(byName)
}

// raise sets v to n if n is larger, and reports whether it did.
func raise(v *atomic.Uint64, n uint64) bool {
	for {
		old := v.Load()
		if n <= old {
			return false
		}
		if v.CompareAndSwap(old, n) {
			return true
		}
	}
}
