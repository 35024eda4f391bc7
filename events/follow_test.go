package events

import (
	"context"
	"testing"
	"time"
)

const deadline = 10 * time.Second

// next returns the tail's next item, failing the test if none comes.
func next(t *testing.T, tl Tail) Item {
	t.Helper()
	select {
	case it, ok := <-tl.Items():
		if !ok {
			t.Fatalf("tail ended: %v", tl.Err())
		}
		return it
	case <-time.After(deadline):
		t.Fatal("no item from the tail")
	}
	return Item{}
}

func wantEvent(t *testing.T, it Item, seq uint64, agent string) {
	t.Helper()
	if it.Gap != nil || it.Event.Seq != seq || it.Event.Agent != agent {
		t.Fatalf("item %+v (gap %+v), want event %d of %s", it.Event, it.Gap, seq, agent)
	}
}

func wantGap(t *testing.T, it Item, after, first uint64) {
	t.Helper()
	if it.Gap == nil || *it.Gap != (Gap{After: after, FirstSeq: first}) {
		t.Fatalf("item %+v (gap %+v), want gap after %d from %d", it.Event, it.Gap, after, first)
	}
}

func follow(t *testing.T, b *Bus, f Follow) Tail {
	t.Helper()
	tl, err := b.Follow(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tl.Close)
	return tl
}

func TestFollowReplaysAfterAnIDThenGoesLive(t *testing.T) {
	t.Parallel()
	b := NewBus(8, nil)
	for _, a := range []string{"a", "b", "a", "a"} {
		b.Publish(Event{Agent: a, Type: Wake})
	}
	tl := follow(t, b, Follow{Replay: true, After: 1, Agent: "a"})
	wantEvent(t, next(t, tl), 3, "a")
	wantEvent(t, next(t, tl), 4, "a")
	b.Publish(Event{Agent: "b"})
	b.Publish(Event{Agent: "a"})
	wantEvent(t, next(t, tl), 6, "a")

	live := follow(t, b, Follow{Filter: func(e Event) bool { return e.Agent == "b" }})
	b.Publish(Event{Agent: "a"})
	b.Publish(Event{Agent: "b"})
	wantEvent(t, next(t, live), 8, "b") // nothing from before, nothing of a
}

func TestFollowSaysGapWhenTheRingLostEvents(t *testing.T) {
	t.Parallel()
	b := NewBus(3, nil)
	for range 5 {
		b.Publish(Event{Agent: "a"})
	}
	tl := follow(t, b, Follow{Replay: true, After: 1})
	wantGap(t, next(t, tl), 1, 3)
	for seq := uint64(3); seq <= 5; seq++ {
		wantEvent(t, next(t, tl), seq, "a")
	}
}

// An id beyond the newest event is from another process's bus (this one
// restarted): the tail says so with a gap whose first_seq is not above
// the id, and replays what the ring holds.
func TestFollowFromAnIDOfAnotherProcess(t *testing.T) {
	t.Parallel()
	b := NewBus(0, nil)
	b.Publish(Event{Agent: "a"})
	b.Publish(Event{Agent: "a"})
	tl := follow(t, b, Follow{Replay: true, After: 500})
	wantGap(t, next(t, tl), 500, 1)
	wantEvent(t, next(t, tl), 1, "a")
	wantEvent(t, next(t, tl), 2, "a")
	b.Publish(Event{Agent: "a"})
	wantEvent(t, next(t, tl), 3, "a")

	empty := follow(t, NewBus(0, nil), Follow{Replay: true, After: 7})
	wantGap(t, next(t, empty), 7, 1)
}

// A tail nobody reads never holds Publish up; once read again it takes
// what the bus dropped for it from the ring, in order, and says gap for
// what the ring lost too.
func TestSlowTailRecoversFromTheRing(t *testing.T) {
	t.Parallel()
	b := NewBus(4*followBuffer, nil)
	tl := follow(t, b, Follow{})
	total := uint64(2 * followBuffer)
	for range total {
		b.Publish(Event{Agent: "a"}) // never blocks, though nobody reads
	}
	for seq := uint64(1); seq <= total; seq++ {
		wantEvent(t, next(t, tl), seq, "a")
	}

	small := NewBus(followBuffer/2, nil)
	lossy := follow(t, small, Follow{})
	for range total {
		small.Publish(Event{Agent: "a"})
	}
	// The tail's buffers held the first events; the ring the newest; the
	// ones between are gone.
	var seq uint64
	sawGap := false
	for seq < total {
		it := next(t, lossy)
		if it.Gap != nil {
			if sawGap || it.Gap.FirstSeq <= it.Gap.After+1 || it.Gap.After != seq {
				t.Fatalf("gap %+v after event %d", *it.Gap, seq)
			}
			sawGap = true
			seq = it.Gap.FirstSeq - 1
			continue
		}
		wantEvent(t, it, seq+1, "a")
		seq++
	}
	if !sawGap {
		t.Fatal("no gap, though the ring lost events")
	}
}

func TestCloseEndsATailAndLetsGoOfTheBus(t *testing.T) {
	t.Parallel()
	b := NewBus(0, nil)
	ctx, cancel := context.WithCancel(context.Background())
	byCtx, err := b.Follow(ctx, Follow{})
	if err != nil {
		t.Fatal(err)
	}
	byClose := follow(t, b, Follow{})
	cancel()
	byClose.Close()
	byClose.Close()
	for _, tl := range []Tail{byCtx, byClose} {
		select {
		case _, ok := <-tl.Items():
			for ok {
				_, ok = <-tl.Items()
			}
		case <-time.After(deadline):
			t.Fatal("tail still open")
		}
		if tl.Err() != nil {
			t.Fatalf("a closed tail reports %v", tl.Err())
		}
	}
	byCtx.Close()
	b.mu.Lock()
	n := len(b.subs)
	b.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d subscriptions left on the bus", n)
	}
}
