package eventstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/events"
)

// inactiveThreshold is how long the server keeps a tail's consumer while
// nobody pulls from it (a client gone without Close, a worker killed).
// A tail whose consumer was removed while it stalled gets a new one from
// where it was.
const inactiveThreshold = time.Minute

// maxResetAttempts is how often in a row a tail's consumer is recreated
// (NATS reconnecting, the consumer lost) before the tail gives up with
// Err: about 25 seconds of backoff. A client then resumes with its last
// id, on this replica or another.
const maxResetAttempts = 5

// Follow returns a tail of the stream: every replica's events, in stream
// order. With f.Replay it starts after the event with id f.After; if the
// stream no longer holds every event after it (removed by events.max_age
// or events.max_bytes), or holds fewer events than f.After (it was
// deleted and created anew), the tail starts with an events.Gap and goes
// on from the oldest event held. Without Replay it starts after the
// newest event stored when Follow is called. f.Agent is filtered by the
// server (the agent's subjects), f.Filter here.
//
// The tail reads through an ordered consumer of its own (ephemeral, in
// memory, removed by Close): it never loses or repeats an event while
// NATS reconnects, and it never holds events for the others. It ends
// with Err set when the stream cannot be read any longer. Follow fails
// when the stream cannot be reached now.
func (s *Stream) Follow(ctx context.Context, f events.Follow) (events.Tail, error) {
	info, err := s.stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("events stream %s: %w", s.o.Name, err)
	}
	// next is the id of the oldest event held; with none held, of the
	// next one to be stored.
	first, last := info.State.FirstSeq, info.State.LastSeq
	next := max(first, 1)
	if info.State.Msgs == 0 {
		next = last + 1
	}
	start := last + 1 // live: after the newest
	var gap *events.Gap
	if f.Replay {
		switch {
		case f.After > last || f.After+1 < next:
			gap = &events.Gap{After: f.After, FirstSeq: next}
			start = next
		default:
			start = f.After + 1
		}
	}
	subject := s.allSubjects()
	if f.Agent != "" {
		subject = s.agentSubjects(f.Agent)
	}
	// A start sequence, not DeliverNew, even live: a consumer the client
	// library recreates before its first event resumes from there too.
	cons, err := s.js.OrderedConsumer(ctx, s.o.Name, jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{subject},
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       start,
		InactiveThreshold: inactiveThreshold,
		MaxResetAttempts:  maxResetAttempts,
	})
	if err != nil {
		return nil, fmt.Errorf("events stream %s: read from %d: %w", s.o.Name, start, err)
	}
	msgs, err := cons.Messages()
	if err != nil {
		s.dropConsumer(cons)
		return nil, fmt.Errorf("events stream %s: read from %d: %w", s.o.Name, start, err)
	}
	tctx, cancel := context.WithCancel(ctx)
	t := &tail{items: make(chan Item, 64), cancel: cancel, ended: make(chan struct{})}
	go t.run(tctx, s, cons, msgs, f, gap)
	return t, nil
}

// Item is events.Item, named here for brevity.
type Item = events.Item

// tail is a Tail of the stream.
type tail struct {
	items  chan Item
	cancel context.CancelFunc
	ended  chan struct{}

	mu  sync.Mutex
	err error
}

func (t *tail) Items() <-chan Item { return t.items }

func (t *tail) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

func (t *tail) Close() {
	t.cancel()
	<-t.ended
}

func (t *tail) run(ctx context.Context, s *Stream, cons jetstream.Consumer, msgs jetstream.MessagesContext, f events.Follow, gap *events.Gap) {
	defer close(t.ended)
	defer close(t.items)
	defer s.dropConsumer(cons)
	defer msgs.Stop()
	send := func(it Item) bool {
		select {
		case t.items <- it:
			return true
		case <-ctx.Done():
			return false
		}
	}
	if gap != nil && !send(Item{Gap: gap}) {
		return
	}
	for {
		m, err := msgs.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				s.log.Warn("events stream: a tail stopped reading", "stream", s.o.Name, "error", err)
				t.mu.Lock()
				t.err = fmt.Errorf("events stream %s: %w", s.o.Name, err)
				t.mu.Unlock()
			}
			return
		}
		e, ok := s.decode(m)
		if !ok || !f.Keep(e) {
			continue
		}
		if !send(Item{Event: e}) {
			return
		}
	}
}

// decode reads an event from a stored message: its id is the stream
// sequence, its agent the subject's (what the server filtered on). A
// message that is not an event (someone else published on an event
// subject) is logged and skipped.
func (s *Stream) decode(m jetstream.Msg) (events.Event, bool) {
	meta, err := m.Metadata()
	if err != nil {
		s.log.Warn("events stream: message without metadata skipped", "stream", s.o.Name, "subject", m.Subject(), "error", err)
		return events.Event{}, false
	}
	var e events.Event
	if err := json.Unmarshal(m.Data(), &e); err != nil {
		s.log.Warn("events stream: a message that is not an event skipped", "stream", s.o.Name,
			"subject", m.Subject(), "seq", meta.Sequence.Stream, "error", err)
		return events.Event{}, false
	}
	e.Seq = meta.Sequence.Stream
	rest, _ := strings.CutPrefix(m.Subject(), s.o.Subjects.Prefix+".")
	if agent, typ, ok := strings.Cut(rest, ".events."); ok {
		e.Agent = agent
		if e.Type == "" {
			e.Type = typ
		}
	}
	if e.Time.IsZero() {
		e.Time = meta.Timestamp
	}
	return e, true
}

// dropConsumer removes a tail's consumer from the server now rather than
// after inactiveThreshold.
func (s *Stream) dropConsumer(cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.js.DeleteConsumer(ctx, s.o.Name, info.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		s.log.Debug("events stream: a tail's consumer not removed; the server removes it when idle", "stream", s.o.Name,
			"consumer", info.Name, "error", err)
	}
}
