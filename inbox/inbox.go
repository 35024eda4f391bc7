// Package inbox is an agent's queue of incoming messages: wake versus
// deferred, coalescing of everything waiting into one framed prompt, caps
// that say what they left out, and the positions and cursors of messages
// in the agents' log. It does not run turns; the driver drains it.
package inbox

import (
	"sync"
	"time"
)

// Kind says whether a message wakes the agent.
type Kind string

const (
	// Wake messages wake a sleeping agent.
	Wake Kind = "inbox"
	// Deferred messages wait for whatever turn comes next and never cut a
	// sleep short.
	Deferred Kind = "deferred"
)

// SourceNATSPrefix starts the Source of a message read from NATS:
// "nats:<subject>".
const SourceNATSPrefix = "nats:"

// DefaultCap is the number of messages an inbox holds when no cap is set.
const DefaultCap = 256

// Message is one piece of external input for an agent.
type Message struct {
	// ID identifies the message for idempotency ("" when the sender gave
	// none).
	ID   string
	Kind Kind
	// Source says where it came from: "api", "nats:alerts.prod.db",
	// "subagent:scan-1".
	Source string
	// Via names the worker receiver the message came through when that
	// decides its wake source: ViaAlertmanager for the Alertmanager
	// receiver (the driver then wakes with source "alertmanager"),
	// ViaSubagent for a subagent's report that crossed NATS, "" for
	// anything else. Set by the API, or by the input log from the
	// Agent-Worker-Via header the API's or a subagent's publish carries. Any NATS
	// publisher can set that header too: Via only labels the wake (metrics,
	// the prompt's wake line) and grants nothing.
	Via string
	// From is the sender's self-declared name; untrusted.
	From string
	// Sender is who the worker authenticated as the message's sender,
	// written by the worker, never by the sender: "api, token ops" for a
	// message posted to the API with the token named ops, "api,
	// unauthenticated" on an API without tokens. "" when nobody was
	// authenticated: a message published on NATS (Source names its
	// subject), a subagent's report. A message that crossed NATS keeps it
	// only under the deployment's seal (natsinbox.HeaderSender), so a
	// publisher cannot claim one. The prompt shows it on the message's
	// header line, outside the fence, next to the untrusted From inside.
	Sender string
	Text   string
	// Attributes are sender-supplied key/values; untrusted.
	Attributes map[string]string
	Received   time.Time
	// Pos is the message's place in the agents' log; zero for a message
	// only memory holds. A message in the log stays there until a
	// recorded turn's cursors cover it: the inbox holds a copy.
	Pos Position
	// Attempts counts turns that drained the message and failed.
	Attempts int
	// TraceParent is the W3C traceparent the message arrived with (its
	// NATS header, or the HTTP request's that queued it), when well
	// formed; "". The turn that drains the message links its span to it.
	// Untrusted: a link, never a parent.
	TraceParent string
}

// ViaSubagent is Message.Via of a background subagent's report that
// arrived over NATS (package background publishes it to the parent's inbox
// subject with this value in the natsinbox.HeaderVia header; the input log
// copies it, and sets Source to "subagent:<id>"): the driver wakes the
// parent with source subagent, named by the message's From (the
// subagent's id), as for a report made in its own process. Like any Via it
// only labels the wake.
const ViaSubagent = "subagent"

// Batch is what one Drain took: the messages, oldest first, and how many
// were dropped for overflow since the previous drain. Waiting, set by the
// taker, counts the messages left for later turns (in the inbox and, not
// yet read, in the log).
type Batch struct {
	Messages []Message
	Dropped  int
	Waiting  int
}

// Inbox is a bounded FIFO of messages: at most its cap of wake messages
// and, separately, at most its cap of deferred ones, so deferred messages
// never crowd out a wake message. It is safe for concurrent use.
type Inbox struct {
	cap      int
	onDrop   func(m Message, reason string)
	mu       sync.Mutex
	queue    []Message
	dropped  int
	deferred int // how many of queue are Deferred, so Len is O(1)
}

// recount recomputes deferred after the queue changed wholesale. Callers
// hold mu.
func (q *Inbox) recount() {
	q.deferred = 0
	for _, m := range q.queue {
		if m.Kind == Deferred {
			q.deferred++
		}
	}
}

// New returns an inbox holding at most capacity wake messages and
// capacity deferred ones (DefaultCap when capacity <= 0). onDrop, if set, is called (outside the lock) for every
// message dropped, with the reason.
func New(capacity int, onDrop func(m Message, reason string)) *Inbox {
	if capacity <= 0 {
		capacity = DefaultCap
	}
	return &Inbox{cap: capacity, onDrop: onDrop}
}

// Push appends m. When m's kind is over the cap, the oldest message of
// that kind is dropped: onDrop is called, and the next Batch counts it.
// (Messages from the log are read only into Room, so they are never
// dropped for the cap.) Push reports whether m should wake the agent.
func (q *Inbox) Push(m Message) (wake bool) {
	q.mu.Lock()
	q.queue = append(q.queue, m)
	if m.Kind == Deferred {
		q.deferred++
	}
	dropped := q.trim()
	q.mu.Unlock()
	q.notify(dropped, "inbox full")
	return m.Kind == Wake
}

// trim drops the oldest messages of each kind beyond the cap. Callers
// hold mu.
func (q *Inbox) trim() []Message {
	overWake := len(q.queue) - q.deferred - q.cap
	overDeferred := q.deferred - q.cap
	if overWake <= 0 && overDeferred <= 0 {
		return nil
	}
	var dropped []Message
	keep := q.queue[:0:0]
	for _, m := range q.queue {
		switch {
		case m.Kind == Deferred && overDeferred > 0:
			overDeferred--
			q.deferred--
		case m.Kind != Deferred && overWake > 0:
			overWake--
		default:
			keep = append(keep, m)
			continue
		}
		dropped = append(dropped, m)
	}
	q.queue = keep
	q.dropped += len(dropped)
	return dropped
}

func (q *Inbox) notify(dropped []Message, reason string) {
	for _, m := range dropped {
		if q.onDrop != nil {
			q.onDrop(m, reason)
		}
	}
}

// Drain removes and returns every waiting message, oldest first, with the
// overflow count since the last Drain.
func (q *Inbox) Drain() Batch {
	q.mu.Lock()
	defer q.mu.Unlock()
	b := Batch{Messages: q.queue, Dropped: q.dropped}
	q.queue, q.dropped, q.deferred = nil, 0, 0
	return b
}

// Take removes what one turn takes and returns it, oldest first, with the
// overflow count since the last Drain or Take: wake messages oldest first
// until their text (Size) reaches maxBytes, then deferred ones in what is
// left of it. At least one message is taken when any waits, however big;
// maxBytes <= 0 takes everything. The rest stay queued in order.
func (q *Inbox) Take(maxBytes int) Batch {
	q.mu.Lock()
	defer q.mu.Unlock()
	if maxBytes <= 0 {
		b := Batch{Messages: q.queue, Dropped: q.dropped}
		q.queue, q.dropped, q.deferred = nil, 0, 0
		return b
	}
	taken := make([]bool, len(q.queue))
	used, n := 0, 0
	for _, wantDeferred := range []bool{false, true} {
		for i, m := range q.queue {
			if (m.Kind == Deferred) != wantDeferred {
				continue
			}
			size := m.Size()
			if n > 0 && used+size > maxBytes {
				break
			}
			taken[i] = true
			used += size
			n++
		}
	}
	b := Batch{Messages: make([]Message, 0, n), Dropped: q.dropped}
	rest := q.queue[:0:0]
	for i, m := range q.queue {
		if taken[i] {
			b.Messages = append(b.Messages, m)
		} else {
			rest = append(rest, m)
		}
	}
	q.queue, q.dropped = rest, 0
	q.recount()
	return b
}

// Size is how much of a turn's input budget the message takes: its text,
// attributes, id, source, self-declared from and authenticated sender,
// in bytes.
func (m Message) Size() int {
	n := len(m.Text) + len(m.ID) + len(m.Source) + len(m.From) + len(m.Sender)
	for k, v := range m.Attributes {
		n += len(k) + len(v)
	}
	return n
}

// Requeue puts a drained batch back in front of anything that arrived
// since, after a turn that did not handle it. With maxAttempts > 0 the turn
// counts as a failed attempt: each message's Attempts is incremented and
// messages that reach maxAttempts are dropped instead, with reason "failed
// in too many turns". With maxAttempts == 0 (an interrupted turn) nothing is
// counted. The cap still holds.
func (q *Inbox) Requeue(b Batch, maxAttempts int) {
	var gaveUp []Message
	keep := make([]Message, 0, len(b.Messages))
	for _, m := range b.Messages {
		if maxAttempts <= 0 {
			keep = append(keep, m)
			continue
		}
		m.Attempts++
		if m.Attempts >= maxAttempts {
			gaveUp = append(gaveUp, m)
			continue
		}
		keep = append(keep, m)
	}
	q.mu.Lock()
	q.queue = append(keep, q.queue...)
	q.recount()
	q.dropped += b.Dropped
	dropped := q.trim()
	q.mu.Unlock()
	q.notify(gaveUp, "failed in too many turns")
	q.notify(dropped, "inbox full")
}

// Remove takes the waiting messages for which match is true out of the
// inbox and returns them.
func (q *Inbox) Remove(match func(Message) bool) []Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []Message
	keep := q.queue[:0:0]
	for _, m := range q.queue {
		if match(m) {
			out = append(out, m)
		} else {
			keep = append(keep, m)
		}
	}
	if len(out) > 0 {
		q.queue = keep
		q.recount()
	}
	return out
}

// Len returns how many wake and deferred messages are waiting, in
// constant time.
func (q *Inbox) Len() (wake, deferred int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue) - q.deferred, q.deferred
}

// Cap returns the inbox's capacity.
func (q *Inbox) Cap() int { return q.cap }

// Room returns how many more wake and deferred messages the inbox holds
// before its cap.
func (q *Inbox) Room() (wake, deferred int) {
	w, d := q.Len()
	return max(q.cap-w, 0), max(q.cap-d, 0)
}

// TakeIDs takes the waiting messages whose ids are in ids (a resumed
// turn's), in queue order; the others stay, and so does the count of
// messages dropped, for the next turn.
func (q *Inbox) TakeIDs(ids []string) Batch {
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	return Batch{Messages: q.Remove(func(m Message) bool { return m.ID != "" && want[m.ID] })}
}

// Missing returns those of ids no waiting message has.
func (q *Inbox) Missing(ids []string) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	have := make(map[string]bool, len(q.queue))
	for _, m := range q.queue {
		have[m.ID] = true
	}
	var out []string
	for _, id := range ids {
		if !have[id] {
			out = append(out, id)
		}
	}
	return out
}
