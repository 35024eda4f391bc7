package inbox

import (
	"maps"
	"time"
)

// Position is where a message sits in the agents' log (the JetStream
// input stream): the bound input it came on — the agent's inbox or
// deferred subject, or a subscribe: subject as configured — and its
// stream sequence. The zero Position marks a message that is not in the
// log (a report made in this process, a core NATS message): nothing but
// memory holds it.
type Position struct {
	Input string
	Seq   uint64
}

// InLog reports whether p is a place in the log.
func (p Position) InLog() bool { return p.Seq > 0 }

// Cursors hold, per bound input, the last stream sequence an agent has
// settled: every message of that input at or below it was handled by a
// recorded turn or dead-lettered. An input that is not in the map has
// settled nothing. The zero value is usable for reading.
type Cursors map[string]uint64

// CursorsKey is the store key an agent's cursors are kept under when they
// move without a turn (messages dead-lettered, an upgrade's first
// cursors): "agent.<name>.cursors". The agent's cursors are the furthest
// of these and its newest turn record's (whose own write carries them).
func CursorsKey(agent string) string { return "agent." + agent + ".cursors" }

// Covers reports whether the message at p is settled.
func (c Cursors) Covers(p Position) bool { return p.InLog() && p.Seq <= c[p.Input] }

// Merge returns c with every input of o that is further along in o: a
// cursor only moves forward. Neither is changed.
func (c Cursors) Merge(o Cursors) Cursors {
	out := maps.Clone(c)
	if out == nil {
		out = Cursors{}
	}
	for k, v := range o {
		if v > out[k] {
			out[k] = v
		}
	}
	return out
}

// Ahead reports whether some input of c is further along than in o.
func (c Cursors) Ahead(o Cursors) bool {
	for k, v := range c {
		if v > o[k] {
			return true
		}
	}
	return false
}

// Room is how many messages of each kind a read of the log may return:
// what the inbox holds before its cap.
type Room struct{ Wake, Deferred int }

// LogRead is what one read of an agent's log returned.
type LogRead struct {
	// Messages are the messages read, each with its Pos, oldest first
	// within each input.
	Messages []Message
	// Through is, per input read, how far the read reached: every message
	// of the input up to it is in Messages, or was refused by the log
	// (its body unusable: dead-lettered, Rejected), or was read before.
	Through Cursors
	// Rejected counts the messages the log dead-lettered during the read.
	Rejected int
	// Waiting counts the agent's messages the log still holds beyond
	// what was read, as far as it knows.
	Waiting int
	// RetryIn, when set, asks for another read after it: the copy of the
	// stream that answered is behind a message the log knows exists.
	RetryIn time.Duration
}
