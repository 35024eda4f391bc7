package natsinbox

import (
	"sync"

	"github.com/agent-worker/agent-worker/natsbus"
)

// The window keeps the messages the router saw for the agents this replica
// serves until their cursors pass them, so that a turn reads its input
// from memory: a batch direct get by subject scans the stream from the
// read position to each message of the subject, every message of every
// other subject in between — with 100 agents' input interleaved, a
// quarter of a burst's CPU went there. The window is bounded in bytes
// (Options.ReadAheadBytes), oldest dropped first; a read it cannot serve
// whole goes to the stream as before, so a backlog of any size still
// costs no more memory than the bound.
//
// For each input the window holds every message the router saw on it
// with a sequence in [from, top]: top is the last message the router
// routed to the input (held or not), and from moves past a message the
// window had to drop or was not given (the agent served elsewhere at the
// time). A read from a position at or past from-1 is served whole from
// the window; any other goes to the stream.

// DefaultReadAheadBytes is the window's bound when
// Options.ReadAheadBytes is 0.
const DefaultReadAheadBytes = 32 << 20

// window is the replica's read-ahead.
type window struct {
	max int64 // bytes; <= 0: the window holds nothing

	mu    sync.Mutex
	bytes int64
	// fifo holds every entry held, oldest first (from head on), for
	// dropping when over max; entries taken out early are marked gone.
	fifo []*held
	head int
}

// held is one message in the window.
type held struct {
	in   *input
	msg  natsbus.DirectMsg
	size int64
	gone bool
}

// span is one input's part of the window; guarded by window.mu.
type span struct {
	msgs     []*held // oldest first
	from     uint64  // every message of the input in [from, top] is in msgs
	top      uint64
	observed bool // top has been set: the router has routed to the input
}

// heldSize is what a message is counted as in the window.
func heldSize(m natsbus.DirectMsg) int64 {
	n := int64(len(m.Data) + len(m.Subject) + 96)
	for k, vs := range m.Header {
		n += int64(len(k))
		for _, v := range vs {
			n += int64(len(v))
		}
	}
	return n
}

// add has the window hold m, routed to in; keep is false when the agent
// is not served here (the window then only notes that it lacks m).
func (w *window) add(in *input, m natsbus.DirectMsg, keep bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := &in.span
	if !s.observed {
		s.observed = true
		s.from = m.Seq // the router starts here: nothing before is held
	} else if m.Seq <= s.top {
		return // routed again (the ordered consumer never does; a guard)
	}
	s.top = m.Seq
	var size int64
	if keep && w.max > 0 {
		size = heldSize(m) // only for what may be kept: most of a replica's input is another's
	}
	if size == 0 || size > w.max {
		w.clearLocked(s, m.Seq+1)
		return
	}
	h := &held{in: in, msg: m, size: size}
	s.msgs = append(s.msgs, h)
	w.fifo = append(w.fifo, h)
	w.bytes += size
	for w.bytes > w.max && w.head < len(w.fifo) {
		old := w.fifo[w.head]
		w.fifo[w.head] = nil
		w.head++
		if old.gone {
			continue
		}
		// The oldest held message is the oldest of its input's too.
		os := &old.in.span
		os.msgs[0] = nil
		os.msgs = os.msgs[1:]
		os.from = max(os.from, old.msg.Seq+1)
		old.gone = true
		w.bytes -= old.size
	}
	if w.head > 1024 && w.head > len(w.fifo)/2 {
		w.fifo = append(w.fifo[:0:0], w.fifo[w.head:]...)
		w.head = 0
	}
}

// open says the input has no message at or below last (the stream's last
// sequence when the router starts after it): the window holds all of it.
func (w *window) open(in *input, last uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := &in.span
	s.observed, s.top = true, max(s.top, last)
}

// lack says messages of in wait at or below seq that the window does not
// hold.
func (w *window) lack(in *input, seq uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := &in.span
	s.observed, s.top = true, max(s.top, seq)
	s.from = max(s.from, seq+1)
}

// clearLocked drops what s holds; from: the first sequence it may hold
// again.
func (w *window) clearLocked(s *span, from uint64) {
	for i, h := range s.msgs {
		h.gone = true
		w.bytes -= h.size
		s.msgs[i] = nil
	}
	s.msgs = s.msgs[:0]
	s.from = max(s.from, from)
}

// clear drops what in holds (its agent is no longer served here).
func (w *window) clear(in *input) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.clearLocked(&in.span, in.span.top+1)
}

// settle drops in's messages at or below cursor: handled.
func (w *window) settle(in *input, cursor uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := &in.span
	i := 0
	for i < len(s.msgs) && s.msgs[i].msg.Seq <= cursor {
		s.msgs[i].gone = true
		w.bytes -= s.msgs[i].size
		s.msgs[i] = nil
		i++
	}
	s.msgs = s.msgs[i:]
}

// read returns up to n of in's messages after after, how many more it
// holds, and the sequence the read reaches when those are all there is
// (top); ok is false when the window cannot tell the whole of it (the
// read must go to the stream).
func (w *window) read(in *input, after uint64, n int) (msgs []natsbus.DirectMsg, pending uint64, top uint64, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := &in.span
	if !s.observed || after+1 < s.from {
		return nil, 0, 0, false
	}
	i := 0
	for i < len(s.msgs) && s.msgs[i].msg.Seq <= after {
		i++
	}
	for ; i < len(s.msgs) && len(msgs) < n; i++ {
		msgs = append(msgs, s.msgs[i].msg)
	}
	return msgs, uint64(len(s.msgs) - i), max(s.top, after), true
}

// size returns the bytes the window holds.
func (w *window) size() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bytes
}
