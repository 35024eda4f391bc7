package clock

import (
	"testing"
	"time"
)

func TestFakeFiresInDueOrder(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewFake(start)
	var got []time.Duration
	for _, d := range []time.Duration{3 * time.Second, time.Second, 2 * time.Second} {
		c.AfterFunc(d, func() { got = append(got, c.Now().Sub(start)) })
	}
	stopped := c.AfterFunc(time.Second, func() { t.Error("stopped timer fired") })
	if !stopped.Stop() {
		t.Fatal("Stop of a pending timer returned false")
	}
	c.Advance(2500 * time.Millisecond)
	if len(got) != 2 || got[0] != time.Second || got[1] != 2*time.Second {
		t.Fatalf("after 2.5s fired at %v, want [1s 2s]", got)
	}
	if c.Timers() != 1 {
		t.Fatalf("Timers() = %d, want 1", c.Timers())
	}
	c.Advance(time.Second)
	if len(got) != 3 || got[2] != 3*time.Second {
		t.Fatalf("fired at %v, want third at 3s", got)
	}
	if !c.Now().Equal(start.Add(3500 * time.Millisecond)) {
		t.Fatalf("Now() = %v", c.Now())
	}
}

func TestFakeTimerArmedInsideCallbackFiresInSameAdvance(t *testing.T) {
	t.Parallel()
	c := NewFake(time.Unix(0, 0))
	n := 0
	var tick func()
	tick = func() {
		n++
		c.AfterFunc(time.Second, tick)
	}
	c.AfterFunc(time.Second, tick)
	armed := c.Armed()
	c.Advance(5 * time.Second)
	if n != 5 {
		t.Fatalf("ticks = %d, want 5", n)
	}
	select {
	case <-armed:
	default:
		t.Fatal("Armed channel not closed after re-arm")
	}
}
