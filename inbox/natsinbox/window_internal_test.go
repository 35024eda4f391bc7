package natsinbox

import (
	"fmt"
	"slices"
	"testing"

	"github.com/agent-worker/agent-worker/natsbus"
)

func seqs(ms []natsbus.DirectMsg) []uint64 {
	var out []uint64
	for _, m := range ms {
		out = append(out, m.Seq)
	}
	return out
}

func msg(seq uint64) natsbus.DirectMsg {
	return natsbus.DirectMsg{Subject: "agents.a.inbox", Seq: seq, Data: []byte(fmt.Sprintf("%04d", seq))}
}

// The window serves a read only when it holds every message of the input
// the read could return: dropping the oldest (over its bound), a message
// it was not given, or messages waiting at start send older reads to the
// stream; settled messages leave it.
func TestTheWindowServesOnlyWhatItHoldsWhole(t *testing.T) {
	t.Parallel()
	a, b := &input{key: "a"}, &input{key: "b"}
	size := heldSize(msg(1))
	w := &window{max: 3 * size}
	w.open(a, 10)
	w.open(b, 10)
	w.add(a, msg(11), true)
	w.add(b, msg(12), true)
	w.add(a, msg(13), true)
	if got, pending, top, ok := w.read(a, 0, 10); !ok || !slices.Equal(seqs(got), []uint64{11, 13}) || pending != 0 || top != 13 {
		t.Fatalf("read a from 0: %v pending %d top %d ok %v; want 11, 13 through 13", seqs(got), pending, top, ok)
	}
	if got, pending, _, ok := w.read(a, 0, 1); !ok || !slices.Equal(seqs(got), []uint64{11}) || pending != 1 {
		t.Fatalf("read one of a: %v pending %d ok %v; want 11 and 1 pending", seqs(got), pending, ok)
	}
	w.add(a, msg(14), true) // over the bound: 11 (a's) goes
	if _, _, _, ok := w.read(a, 10, 10); ok {
		t.Fatal("a read from before a dropped message was served by the window")
	}
	if got, _, _, ok := w.read(a, 11, 10); !ok || !slices.Equal(seqs(got), []uint64{13, 14}) {
		t.Fatalf("read a after 11: %v ok %v; want 13, 14", seqs(got), ok)
	}
	if got, _, _, ok := w.read(b, 10, 10); !ok || !slices.Equal(seqs(got), []uint64{12}) {
		t.Fatalf("read b: %v ok %v; want 12", seqs(got), ok)
	}
	w.add(a, msg(14), true) // routed twice: ignored
	w.settle(a, 13)
	if got, _, _, ok := w.read(a, 13, 10); !ok || !slices.Equal(seqs(got), []uint64{14}) {
		t.Fatalf("read a after settling 13: %v ok %v; want 14", seqs(got), ok)
	}
	if n := w.size(); n != 2*size {
		t.Fatalf("the window counts %d bytes; want %d (12 and 14)", n, 2*size)
	}
	w.add(b, msg(15), false) // b not served here when 15 came
	if _, _, _, ok := w.read(b, 12, 10); ok {
		t.Fatal("a read over a message the window was not given was served by it")
	}
	if got, _, top, ok := w.read(b, 15, 10); !ok || len(got) != 0 || top != 15 {
		t.Fatalf("read b after 15: %v top %d ok %v; want nothing through 15", seqs(got), top, ok)
	}
	c := &input{key: "c"}
	w.open(c, 10)
	w.lack(c, 10) // messages wait at or below 10
	if _, _, _, ok := w.read(c, 5, 10); ok {
		t.Fatal("a read over messages waiting at start was served by the window")
	}
	if _, _, _, ok := w.read(c, 10, 10); !ok {
		t.Fatal("a read past the messages waiting at start was not served by the window")
	}
}
