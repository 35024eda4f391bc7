// Package events is the in-process stream of what agents do: turns
// started, completed and failed, messages queued and dropped, wakes,
// pauses, reports. NATS, the durable events stream (package eventstream),
// Server-Sent Events and metrics subscribe to it; it must not know about
// any of them.
//
// A Bus holds one process's events and the newest of them in a ring. A
// Tail (Follow) reads a history of events in id order and then follows
// it live: a Bus's ring, or the durable stream that holds every replica's
// events.
package events

import (
	"log/slog"
	"sync"
	"time"
)

// Event types published by the worker.
const (
	TurnStarted   = "turn-started"
	TurnCompleted = "turn-completed"
	TurnFailed    = "turn-failed"
	// TurnResumed: a turn resumed an earlier turn's journal (package
	// journal) instead of starting over. Data: turn, journal_turn (the
	// turn that began the journal: its side effects' ids), steps (model
	// responses and tool results recorded, replayed as the turn reaches
	// them), resumes.
	TurnResumed = "turn-resumed"
	// JournalAbandoned: an unfinished turn journal was given up; its
	// messages run in an ordinary turn. Data: journal_turn, steps, reason
	// (interrupted, halted, timeout, capped, expired, inputs_missing,
	// too_large).
	JournalAbandoned = "journal-abandoned"
	// ApprovalRequested: a call of a tool that needs an operator's
	// approval was held, not run. Data: id, tool, args (clipped), turn,
	// expires.
	ApprovalRequested = "approval-requested"
	// ApprovalDecided: a held call was approved (and run: outcome ok or
	// error), denied, or expired. Data: id, tool, decision, outcome, by,
	// reason.
	ApprovalDecided = "approval-decided"
	MessageQueued   = "message-queued"
	MessageDropped  = "message-dropped"
	Wake            = "wake"
	Paused          = "paused"
	Resumed         = "resumed"
	Interrupted     = "interrupted"
	Halted          = "halted"
	ReportDone      = "report-done"
	WakeScheduled   = "wake-scheduled"
	Throttled       = "throttled"
	Stopping        = "stopping"
	// Ownership: this replica gained or lost an agent's lease. Data: owned.
	Ownership = "ownership"
	// MessageRejected: input refused (bad body, unknown agent) and sent
	// to the dead-letter subject. Data: reason, subject.
	MessageRejected = "message-rejected"
	// ConfigReloaded: the worker re-read its config file (SIGHUP or POST
	// /v1/reload), published for every agent it serves once the reload
	// ended. Data: by (who asked: "signal SIGHUP", a token's name), what
	// ("config"), ok, outcome (applied, unchanged, refused, failed); when
	// applied: hash and previous (the configs' content hashes), added,
	// removed and changed (agent names), tokens (the count); when not:
	// error, and problems ("file:line: message" each) for a refusal. The
	// event's time is when.
	ConfigReloaded = "config-reloaded"
	// MessageDuplicate: a redelivered or republished message whose turn
	// already completed; acked without a second turn.
	MessageDuplicate = "message-duplicate"
	// MessageUnsealed: a message claimed to come through the worker
	// (the Agent-Worker-Via header: an Alertmanager notification, a
	// subagent's report; the Agent-Worker-Sender header: a sender the API
	// authenticated) without the deployment's seal; the claims were
	// ignored and the message delivered as any other. Data: subject, via
	// and sender (the claims, "" when not made), id (its Nats-Msg-Id, if
	// any).
	MessageUnsealed = "message-unsealed"
	// ModelSwitched: an operator switched the agent's model, or back to
	// the configured one (reset); it is used from the next model call.
	// Data: model (the key in force), name (what pricing looks up),
	// reasoning_effort (when given), configured (the config's key),
	// previous and previous_name (the model before), reset, by, reason.
	ModelSwitched = "model-switched"
	// ModelSwitchDropped: a stored model switch could not be used any
	// more (its model is gone from the config after a reload or a
	// restart, or cannot take the effort) and was deleted; the agent runs
	// on its configured model. Data: model, reasoning_effort, configured,
	// error, switched_by, switched_since.
	ModelSwitchDropped = "model-switch-dropped"
	// MessageHandled: a completed, recorded turn handled the message.
	// Data: id, turn, source, kind, outcome ("completed"). One per message
	// of the turn, after turn-completed's data is settled.
	MessageHandled = "message-handled"
	// RetryScheduled: a failed turn will be retried by itself. Data: at,
	// delay_ms, failures (in a row), reason ("failure" or "outage").
	RetryScheduled = "retry-scheduled"
	// Waiting: turns wait because a dependency is down; no model calls.
	// Data: reason. WaitingOver follows when they may run again.
	Waiting     = "waiting"
	WaitingOver = "waiting-over"
	// Steered: an operator's message was given to the running turn
	// before its next model call (POST messages with steer). Data: id,
	// turn, by, reason.
	Steered = "steered"
	// TurnSkipped: the agent woke with nothing to do — an operator's bare
	// wake or resume, or a failed turn's retry, with no message, task,
	// instruction, report or decision queued — and ran no turn (no model
	// call). Data: reason ("nothing_to_do"), wakes (as turn-started's).
	TurnSkipped = "turn-skipped"
	// WakeDropped: a wake cause carrying a task (a schedule prompt, an
	// operator message) given up after failing too many turns. Data:
	// source, name, reason.
	WakeDropped = "wake-dropped"
	// MemoryCompacted: turns were folded into the agent's memory. Data:
	// turns, through, tokens, turns_folded, cost_usd, duration_ms,
	// clipped, forced, model.
	MemoryCompacted = "memory-compacted"
	// MemoryCompactionFailed: a fold failed; its turns stay and it is
	// retried. Data: error, turns, failures (in a row), retry_in_ms.
	MemoryCompactionFailed = "memory-compaction-failed"
	// MemoryCompactionSkipped: a fold was due but did not run. Data:
	// reason (halted, paused, guardrail, unavailable, cleared); said once
	// per reason until a fold runs.
	MemoryCompactionSkipped = "memory-compaction-skipped"
	// MemoryCleared: an operator cleared the memory. Data: by, reason,
	// turns_folded and tokens it held.
	MemoryCleared = "memory-cleared"
	// MemoryTurnsDropped: turns that left the window were deleted
	// unfolded because the store's bound was reached while folds kept
	// failing. Data: turns (their numbers), count.
	MemoryTurnsDropped = "memory-turns-dropped"
	// Asked: an operator's ask was answered, refused or failed; it is not
	// a turn and left nothing in the agent's history. Data: outcome
	// (answered, refused, failed, timeout, cancelled), by, question (cut
	// to 500 runes), answer (cut to 2000), model, tokens_in, tokens_out,
	// cost_usd, duration_ms, error.
	Asked = "asked"
)

// Event is one thing that happened to one agent.
type Event struct {
	// Seq is the event's id. On a Bus it numbers the bus's events from 1,
	// without gaps, for the life of the process. Read back from the
	// durable events stream (package eventstream) it is the stream's
	// sequence number, which survives restarts and is shared by every
	// replica; the message body on NATS has no seq (the stream's sequence
	// is the id).
	Seq   uint64    `json:"seq,omitempty"`
	Time  time.Time `json:"time"`
	Agent string    `json:"agent"`
	Type  string    `json:"type"`
	// Replica names the replica (lease.holder) that published the event.
	// Set on events read back from the durable events stream; empty on a
	// Bus, where every event is this process's.
	Replica string         `json:"replica,omitempty"`
	Data    map[string]any `json:"data,omitempty"`
}

// Bus fans events out to subscribers and keeps the newest ones for replay.
//
// Publish never blocks: a subscriber whose buffer is full misses the event,
// which is counted on the subscription (Dropped) and logged (at most one
// line per subscription per 10 seconds, with the count of those not
// logged); it can recover what it missed with Since while the ring still
// holds it.
type Bus struct {
	log  *slog.Logger
	mu   sync.Mutex
	seq  uint64
	ring []Event // circular once full: the oldest is at ring[head]
	head int
	size int
	subs map[*Subscription]struct{}
	taps []func(Event)
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
	// lostFrom is the sequence number of the oldest event dropped for
	// this subscription since a Tail last recovered; 0: none.
	lostFrom uint64
	loggedAt time.Time // the last drop logged
	unlogged uint64    // drops since, not logged
}

// dropLogEvery is how often a subscription's drops are logged at most.
const dropLogEvery = 10 * time.Second

// Publish stamps e with the next sequence number (and Time if unset) and
// delivers it. It returns the stamped event.
func (b *Bus) Publish(e Event) Event {
	e, taps := b.publish(e)
	for _, f := range taps {
		f(e)
	}
	return e
}

// Tap registers f to be called with every event published from now on,
// synchronously, in the publisher's goroutine, after the subscribers
// were offered it: the driver adds a traced turn's events to its span.
// f must be quick and must not publish on b.
func (b *Bus) Tap(f func(Event)) {
	b.mu.Lock()
	b.taps = append(b.taps, f)
	b.mu.Unlock()
}

func (b *Bus) publish(e Event) (Event, []func(Event)) {
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
			if s.lostFrom == 0 {
				s.lostFrom = e.Seq
			}
			// One line per subscription per dropLogEvery, so a stalled
			// subscriber does not flood the log; the count is exact.
			if now := time.Now(); now.Sub(s.loggedAt) >= dropLogEvery {
				b.log.Warn("event subscriber too slow; event dropped for it", "agent", e.Agent, "type", e.Type, "seq", e.Seq,
					"dropped_total", s.dropped, "not_logged_since_last", s.unlogged)
				s.loggedAt, s.unlogged = now, 0
			} else {
				s.unlogged++
			}
		}
	}
	return e, b.taps
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

// lossFrom returns the sequence number of the oldest event dropped for s
// since clearLoss; 0 when none was.
func (s *Subscription) lossFrom() uint64 {
	s.bus.mu.Lock()
	defer s.bus.mu.Unlock()
	return s.lostFrom
}

// clearLoss forgets the drops so far: the caller recovers them from the
// ring after this call.
func (s *Subscription) clearLoss() {
	s.bus.mu.Lock()
	defer s.bus.mu.Unlock()
	s.lostFrom = 0
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
