package wait

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// fatalRecorder is a testing.TB that records Fatalf instead of ending the
// test, so a failing wait can be checked.
type fatalRecorder struct {
	testing.TB
	fatal string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
}

func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	var done atomic.Bool
	go done.Store(true)
	rec := &fatalRecorder{TB: t}
	For(rec, "the other goroutine", done.Load)
	if rec.fatal != "" || !done.Load() {
		t.Fatalf("For returned with done %v, failure %q", done.Load(), rec.fatal)
	}
	calls := 0
	For(rec, "the third call", func() bool { calls++; return calls == 3 })
	if rec.fatal != "" || calls != 3 {
		t.Fatalf("after %d calls Fatalf %q, want 3 calls and no failure", calls, rec.fatal)
	}
}

func TestWithinFailsNamingWhatAtTheDeadline(t *testing.T) {
	t.Parallel()
	rec := &fatalRecorder{TB: t}
	start := time.Now()
	Within(rec, 30*time.Millisecond, "the moon", func() bool { return false })
	if took := time.Since(start); took < 30*time.Millisecond {
		t.Fatalf("Within gave up after %v, before its deadline", took)
	}
	if want := "timed out after 30ms waiting for the moon"; rec.fatal != want {
		t.Fatalf("Fatalf %q, want %q", rec.fatal, want)
	}
}

func TestNoErrorReportsTheLastError(t *testing.T) {
	t.Parallel()
	rec := &fatalRecorder{TB: t}
	calls := 0
	NoError(rec, 20*time.Millisecond, "a quorum", func() error {
		calls++
		return fmt.Errorf("call %d: %w", calls, errors.New("2 of 3 peers current"))
	})
	want := fmt.Sprintf("timed out after 20ms waiting for a quorum: call %d: 2 of 3 peers current", calls)
	if calls < 2 || rec.fatal != want {
		t.Fatalf("after %d calls Fatalf %q, want %q", calls, rec.fatal, want)
	}
}

func TestNoErrorReturnsOnNil(t *testing.T) {
	t.Parallel()
	rec := &fatalRecorder{TB: t}
	calls := 0
	NoError(rec, time.Minute, "the third try", func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if rec.fatal != "" || calls != 3 {
		t.Fatalf("after %d calls Fatalf %q, want 3 calls and no failure", calls, rec.fatal)
	}
}

// A condition that holds on the call that ends past the deadline counts
// as met, not as a timeout.
func TestWithinAcceptsAConditionMetAtTheDeadline(t *testing.T) {
	t.Parallel()
	rec := &fatalRecorder{TB: t}
	Within(rec, time.Millisecond, "a slow yes", func() bool {
		time.Sleep(5 * time.Millisecond) // the call itself outlasts the deadline
		return true
	})
	if rec.fatal != "" {
		t.Fatalf("Within failed a condition that held: %s", rec.fatal)
	}
}
