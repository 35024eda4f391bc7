package health

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/outage"
)

const deadline = 10 * time.Second

// switchable is a probe whose answer the test sets.
type switchable struct{ err atomic.Pointer[error] }

func (s *switchable) set(err error) { s.err.Store(&err) }
func (s *switchable) probe(context.Context) error {
	if p := s.err.Load(); p != nil {
		return *p
	}
	return nil
}

func TestOutageIsReportedAndRecoveryAnnounced(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC))
	var store switchable
	m := New(Options{Clock: c}, Check{Name: "nats", Probe: func(context.Context) error { return nil }}, Check{Name: "store", Probe: store.probe})
	changes := make(chan bool, 10)
	m.OnChange(func(up bool) { changes <- up })
	m.Start()
	defer m.Stop()
	if err := m.Unavailable(); err != nil || len(m.Problems()) != 0 {
		t.Fatalf("healthy at start: %v %v", err, m.Problems())
	}

	store.set(errors.New("connection refused"))
	c.Advance(time.Second)
	if up := <-changes; up {
		t.Fatal("first change announced up")
	}
	err := m.Unavailable()
	if !outage.Is(err) || outage.Dependency(err) != "store" || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Unavailable = %v, want a store outage", err)
	}
	if p := m.Problems(); len(p) != 1 || p[0] != "store: connection refused" {
		t.Fatalf("Problems = %q", p)
	}

	store.set(nil)
	m.Failed(errors.New("commit failed")) // probes now, no clock advance
	if up := <-changes; !up {
		t.Fatal("recovery not announced")
	}
	if err := m.Unavailable(); err != nil {
		t.Fatalf("still unavailable after recovery: %v", err)
	}
	st := m.Statuses()
	if len(st) != 2 || st[1].Name != "store" || st[1].Err != nil {
		t.Fatalf("Statuses = %+v", st)
	}
}

func TestHungProbeNeverBlocksReaders(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC))
	release := make(chan struct{})
	var probes atomic.Int32
	hung := func(context.Context) error { // ignores its context
		probes.Add(1)
		<-release
		return nil
	}
	m := New(Options{Clock: c, Timeout: 20 * time.Millisecond}, Check{Name: "store", Probe: hung})
	defer close(release)
	m.Start() // returns although the probe never answers
	defer m.Stop()
	wait.Within(t, deadline, "the hung probe to be reported", func() bool {
		c.Advance(time.Second) // a round notices the probe is overdue
		return errors.Is(m.Unavailable(), ErrProbeTimeout)
	})
	if n := probes.Load(); n != 1 {
		t.Fatalf("%d probes started while the first hung, want 1", n)
	}
	if p := m.Problems(); len(p) != 1 || !strings.Contains(p[0], "did not answer in time") {
		t.Fatalf("Problems = %q", p)
	}
}

func TestProbeHonouringItsDeadlineIsATimeout(t *testing.T) {
	t.Parallel()
	slow := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	m := New(Options{Clock: clock.NewFake(time.Now()), Timeout: 10 * time.Millisecond}, Check{Name: "store", Probe: slow})
	m.Start()
	defer m.Stop()
	wait.Within(t, deadline, "a timeout", func() bool { return errors.Is(m.Unavailable(), ErrProbeTimeout) })
}
