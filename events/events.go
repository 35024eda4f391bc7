// Package events is the in-process stream of what agents do: turns
// started, completed and failed, messages queued and dropped, wakes,
// pauses, reports. NATS, Server-Sent Events and metrics subscribe to it;
// it must not know about any of them.
package events

import (
	"log/slog"
	"sync"
	"time"
)

// Event types published by the worker.
const (
	TurnStarted    = "turn-started"
	TurnCompleted  = "turn-completed"
	TurnFailed     = "turn-failed"
	MessageQueued  = "message-queued"
	MessageDropped = "message-dropped"
	Wake           = "wake"
	Paused         = "paused"
	Resumed        = "resumed"
	Interrupted    = "interrupted"
	Halted         = "halted"
	ReportDone     = "report-done"
	WakeScheduled  = "wake-scheduled"
	Throttled      = "throttled"
	Stopping       = "stopping"
	// Ownership: this replica gained or lost an agent's lease. Data: owned.
	Ownership = "ownership"
	// MessageRejected: input refused (bad body, unknown agent) and sent
	// to the dead-letter subject. Data: reason, subject.
	MessageRejected = "message-rejected"
	// MessageDuplicate: a redelivered or republished message whose turn
	// already completed; acked without a second turn.
	MessageDuplicate = "message-duplicate"
	// RetryScheduled: a failed turn will be retried by itself. Data: at,
	// delay_ms, failures (in a row), reason ("failure" or "outage").
	RetryScheduled = "retry-scheduled"
	// Waiting: turns wait because a dependency is down; no model calls.
	// Data: reason. WaitingOver follows when they may run again.
	Waiting     = "waiting"
	WaitingOver = "waiting-over"
	// WakeDropped: a wake cause carrying a task (a schedule prompt, an
	// operator message) given up after failing too many turns. Data:
	// source, name, reason.
	WakeDropped = "wake-dropped"
)

// Event is one thing that happened to one agent.
type Event struct {
	// Seq numbers events of one Bus from 1, without gaps.
	Seq   uint64         `json:"seq"`
	Time  time.Time      `json:"time"`
	Agent string         `json:"agent"`
	Type  string         `json:"type"`
	Data  map[string]any `json:"data,omitempty"`
}

// Bus fans events out to subscribers and keeps the newest ones for replay.
//
// Publish never blocks: a subscriber whose buffer is full misses the event,
// which is logged and counted on the subscription (Dropped); it can recover
// what it missed with Since while the ring still holds it.
type Bus struct {
	log  *slog.Logger
	mu   sync.Mutex
	seq  uint64
	ring []Event // circular once full: the oldest is at ring[head]
	head int
	size int
	subs map[*Subscription]struct{}
}

// NewBus returns a bus that keeps the newest ringSize events (default
// 1024 when ringSize <= 0).
func NewBus(ringSize int, log *slog.Logger) *Bus {
	if ringSize <= 0 {
		ringSize = 1024
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Bus{log: log, size: ringSize, subs: map[*Subscription]struct{}{}}
}

// Subscription receives events published after it was made.
type Subscription struct {
	C       <-chan Event
	c       chan Event
	bus     *Bus
	filter  func(Event) bool
	dropped uint64
}

// Publish stamps e with the next sequence number (and Time if unset) and
// delivers it. It returns the stamped event.
func (b *Bus) Publish(e Event) Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	e.Seq = b.seq
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	if len(b.ring) < b.size {
		b.ring = append(b.ring, e)
	} else {
		b.ring[b.head] = e
		b.head = (b.head + 1) % b.size
	}
	for s := range b.subs {
		if s.filter != nil && !s.filter(e) {
			continue
		}
		select {
		case s.c <- e:
		default:
			s.dropped++
			b.log.Warn("event subscriber too slow; event dropped for it", "agent", e.Agent, "type", e.Type, "seq", e.Seq, "dropped_total", s.dropped)
		}
	}
	return e
}

// Subscribe returns a subscription with a buffer of n events that receives
// the events for which filter returns true (all when filter is nil).
func (b *Bus) Subscribe(n int, filter func(Event) bool) *Subscription {
	c := make(chan Event, n)
	s := &Subscription{C: c, c: c, bus: b, filter: filter}
	b.mu.Lock()
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	return s
}

// Close stops delivery and closes C.
func (s *Subscription) Close() {
	b := s.bus
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.subs[s]; ok {
		delete(b.subs, s)
		close(s.c)
	}
}

// Dropped returns how many events this subscription missed because its
// buffer was full.
func (s *Subscription) Dropped() uint64 {
	s.bus.mu.Lock()
	defer s.bus.mu.Unlock()
	return s.dropped
}

// Since returns the retained events with Seq > seq, oldest first, and
// whether the ring still held everything after seq (false means some were
// already overwritten).
func (b *Bus) Since(seq uint64) ([]Event, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.ring)
	if n == 0 {
		return nil, true
	}
	oldest := b.ring[b.head%n].Seq
	complete := oldest <= seq+1
	var out []Event
	for i := range n {
		if e := b.ring[(b.head+i)%n]; e.Seq > seq {
			out = append(out, e)
		}
	}
	return out, complete
}
