package events

import (
	"testing"
)

func TestBusDeliversReplaysAndCountsDrops(t *testing.T) {
	t.Parallel()
	b := NewBus(3, nil)
	all := b.Subscribe(10, nil)
	onlyA := b.Subscribe(10, func(e Event) bool { return e.Agent == "a" })
	tiny := b.Subscribe(1, nil)
	for _, agent := range []string{"a", "b", "a", "b"} {
		b.Publish(Event{Agent: agent, Type: Wake})
	}
	if got := len(all.C); got != 4 {
		t.Fatalf("all got %d events, want 4", got)
	}
	if got := len(onlyA.C); got != 2 {
		t.Fatalf("filtered got %d events, want 2", got)
	}
	if got := tiny.Dropped(); got != 3 {
		t.Fatalf("tiny dropped %d, want 3", got)
	}
	first := <-all.C
	if first.Seq != 1 || first.Time.IsZero() {
		t.Fatalf("first event %+v: want seq 1 and a time", first)
	}
	got, complete := b.Since(1)
	if !complete || len(got) != 3 || got[0].Seq != 2 {
		t.Fatalf("Since(1) = %d events from %v, complete=%v", len(got), got, complete)
	}
	if _, complete := b.Since(0); complete {
		t.Fatal("Since(0) claims completeness after event 1 left the ring")
	}
	for range 5 {
		b.Publish(Event{Agent: "c"})
	}
	got, _ = b.Since(0)
	if len(got) != 3 || got[0].Seq != 7 || got[2].Seq != 9 {
		t.Fatalf("after wrapping, Since(0) = %v, want seqs 7..9", got)
	}
	all.Close()
	all.Close() // idempotent
	b.Publish(Event{Agent: "a"})
	for range all.C {
	}
}
