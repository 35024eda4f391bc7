package driver

import (
	"context"
	"fmt"
	"sync"

	"github.com/agent-worker/agent-worker/inbox"
)

// memLog is an in-memory input log (Log) for the tests: messages are
// appended with rising sequences, on input "in" (wake) or "def"
// (deferred); reads, settles and dead letters are recorded.
type memLog struct {
	mu      sync.Mutex
	seq     uint64
	msgs    []inbox.Message
	settled inbox.Cursors
	dead    []deadLetterCall
	reads   int
	// deadErr, when set, fails every DeadLetter.
	deadErr error
}

type deadLetterCall struct {
	id, reason string
	seq        uint64
}

func newMemLog() *memLog { return &memLog{settled: inbox.Cursors{}} }

// withLog gives the harness's driver log.
func withLog(log *memLog) func(*Deps) { return func(d *Deps) { d.Input = log } }

// add appends m to the log (its id "m<seq>" when it has none) and tells
// a, as the router would; it returns m as the log holds it.
func (l *memLog) add(a *Agent, m inbox.Message) inbox.Message {
	l.mu.Lock()
	l.seq++
	input := "in"
	if m.Kind == inbox.Deferred {
		input = "def"
	}
	if m.Kind == "" {
		m.Kind = inbox.Wake
	}
	if m.ID == "" {
		m.ID = fmt.Sprintf("m%d", l.seq)
	}
	m.Pos = inbox.Position{Input: input, Seq: l.seq}
	l.msgs = append(l.msgs, m)
	l.mu.Unlock()
	if a != nil {
		a.Notify()
	}
	return m
}

func (l *memLog) Read(_ context.Context, _ string, from inbox.Cursors, room inbox.Room) (inbox.LogRead, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reads++
	out := inbox.LogRead{Through: inbox.Cursors{}}
	for _, m := range l.msgs {
		if m.Pos.Seq <= from[m.Pos.Input] {
			continue
		}
		left := &room.Wake
		if m.Kind == inbox.Deferred {
			left = &room.Deferred
		}
		if *left <= 0 {
			out.Waiting++
			continue
		}
		*left--
		out.Messages = append(out.Messages, m)
		out.Through[m.Pos.Input] = m.Pos.Seq
	}
	return out, nil
}

func (l *memLog) Settled(_ string, c inbox.Cursors) {
	l.mu.Lock()
	l.settled = l.settled.Merge(c)
	l.mu.Unlock()
}

func (l *memLog) DeadLetter(_ context.Context, _ string, m inbox.Message, reason, _ string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.deadErr != nil {
		return l.deadErr
	}
	l.dead = append(l.dead, deadLetterCall{id: m.ID, reason: reason, seq: m.Pos.Seq})
	return nil
}

// cursor is how far the settled cursors are on input.
func (l *memLog) cursor(input string) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.settled[input]
}

// deadLetters returns the dead letters so far.
func (l *memLog) deadLetters() []deadLetterCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]deadLetterCall(nil), l.dead...)
}

// readCount is how many reads were made.
func (l *memLog) readCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reads
}
