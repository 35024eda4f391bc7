package lease

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// lateAck is a store whose Update, while armed, is applied by the server
// but reported to the client as timed out: what a NATS reconnect does to
// a renewal whose reply is lost.
type lateAck struct {
	store.Store
	key  string       // only Updates of this key are affected
	lose atomic.Int32 // how many more Updates to apply and then fail; < 0: all
	down atomic.Bool  // Get and Update fail without reaching the store
}

func (s *lateAck) Get(ctx context.Context, k string) (store.Entry, error) {
	if s.down.Load() {
		return store.Entry{}, errors.New("store unreachable")
	}
	return s.Store.Get(ctx, k)
}

func (s *lateAck) Update(ctx context.Context, k string, v []byte, rev uint64) (uint64, error) {
	if s.down.Load() {
		return 0, errors.New("store unreachable")
	}
	newRev, err := s.Store.Update(ctx, k, v, rev)
	if err != nil || k != s.key {
		return newRev, err
	}
	if n := s.lose.Load(); n < 0 || (n > 0 && s.lose.CompareAndSwap(n, n-1)) {
		return 0, context.DeadlineExceeded
	}
	return newRev, nil
}

// syncBuf is a log sink safe for concurrent writes.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// loggedReplica is replica with its log kept in out.
func loggedReplica(t *testing.T, name string, st store.Store, c *clock.Fake, l *log, out *syncBuf) *Manager {
	t.Helper()
	m, err := New([]string{"a", "b"}, Options{Store: st, Clock: c, Holder: name, TTL: 15 * time.Second,
		Log:       slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnAcquire: func(agent string, _ Gain) { l.add(name + "+" + agent) },
		OnLose:    func(agent string, _ Reason) { l.add(name + "-" + agent) },
	})
	if err != nil {
		t.Fatal(err)
	}
	l.watch(m)
	m.Start(context.Background())
	return m
}

// holderOf reads who the store says holds the agent's lease.
func holderOf(t *testing.T, st store.Store, agent string) (record, uint64) {
	t.Helper()
	e, err := st.Get(context.Background(), key(agent))
	if err != nil {
		t.Fatalf("lease record of %s: %v", agent, err)
	}
	var r record
	if err := json.Unmarshal(e.Value, &r); err != nil {
		t.Fatalf("lease record of %s: %v", agent, err)
	}
	return r, e.Revision
}

// replicaOf reads holder's replica record.
func replicaOf(t *testing.T, st store.Store, holder string) (replicaRecord, uint64) {
	t.Helper()
	e, err := st.Get(context.Background(), replicaKey(holder))
	if err != nil {
		t.Fatalf("replica record of %s: %v", holder, err)
	}
	var r replicaRecord
	if err := json.Unmarshal(e.Value, &r); err != nil {
		t.Fatalf("replica record of %s: %v", holder, err)
	}
	return r, e.Revision
}

// A renewal the server applied but whose reply was lost makes the next
// compare-and-set conflict with the replica's own write. That is not a
// loss: the replica keeps its leases and keeps renewing its record; a
// genuine takeover of a lease by another holder still is a loss, found
// when the holder reads the lease back.
func TestRenewalAppliedButTimedOutIsNotALoss(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	base := memstore.New(c)
	st := &lateAck{Store: base, key: replicaKey("r1")}
	l := &log{}
	out := &syncBuf{}
	r1 := loggedReplica(t, "r1", st, c, l, out)
	r2 := replica(t, "r2", base, c, l)
	if !r1.Held("a") {
		t.Fatalf("r1 did not take a: %v", l.all())
	}
	_, before := replicaOf(t, base, "r1")

	st.lose.Store(1)
	c.Advance(5 * time.Second) // renewal applied, reply lost
	if _, rev := replicaOf(t, base, "r1"); rev == before {
		t.Fatal("the armed renewal was not applied to the store")
	}
	for i := range 6 { // the next rounds conflict with r1's own write
		c.Advance(5 * time.Second)
		if !r1.Held("a") || r2.Held("a") {
			t.Fatalf("round %d after the lost reply: r1 holds a %v, r2 %v; events %v\nlog:\n%s",
				i+1, r1.Held("a"), r2.Held("a"), l.all(), out)
		}
	}
	if got := l.all(); slices.Contains(got, "r1-a") || slices.Contains(got, "r2+a") {
		t.Fatalf("r1 was told it lost a to its own write: events %v\nlog:\n%s", got, out)
	}
	if rec, _ := holderOf(t, base, "a"); rec.Holder != "r1" {
		t.Fatalf("store says %+v, want r1 holding a", rec)
	}
	self, _ := replicaOf(t, base, "r1")
	if self.Expires.Before(c.Now().Add(10 * time.Second)) {
		t.Fatalf("r1 stopped renewing its record: it expires at %v, now %v", self.Expires, c.Now())
	}
	logged := out.String()
	if strings.Contains(logged, "another replica") || strings.Contains(logged, "another holder") {
		t.Fatalf("r1 named itself another replica:\n%s", logged)
	}
	if !strings.Contains(logged, "renewal of this replica's record had already been applied; keeping it") {
		t.Fatalf("adopting the applied renewal was not logged:\n%s", logged)
	}

	// A genuine takeover is still a loss: another holder's record over
	// the lease (as if r3 had taken it after expiry), found within a
	// read-back of every held lease.
	_, rev := holderOf(t, base, "a")
	theirs, _ := json.Marshal(record{Holder: "r3", Expires: c.Now().Add(time.Hour)})
	if _, err := base.Update(context.Background(), key("a"), theirs, rev); err != nil {
		t.Fatal(err)
	}
	c.Advance(verifyRounds * 5 * time.Second)
	if r1.Held("a") {
		t.Fatalf("r1 still holds a after r3 took it: events %v\nlog:\n%s", l.all(), out)
	}
	if !slices.Contains(l.all(), "r1-a") {
		t.Fatalf("r1 was not told it lost a: %v", l.all())
	}
	if rec, _ := holderOf(t, base, "a"); rec.Holder != "r3" {
		t.Fatalf("store says %+v, want r3's record untouched", rec)
	}
	if !strings.Contains(out.String(), "lease lost to another replica") {
		t.Fatalf("the takeover was not logged as a loss:\n%s", out)
	}
	if !r1.Held("b") {
		t.Fatal("r1 lost b too")
	}
}

// When every renewal is applied but no reply arrives, each round's read
// proves the last renewal landed, so the replica keeps the lease.
func TestRenewalsAppliedButNeverAcknowledgedKeepTheLease(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	base := memstore.New(c)
	st := &lateAck{Store: base, key: replicaKey("r1")}
	l := &log{}
	r1 := replica(t, "r1", st, c, l)
	r2 := replica(t, "r2", base, c, l)
	st.lose.Store(-1)
	for i := range 12 {
		c.Advance(5 * time.Second)
		if !r1.Held("a") || r2.Held("a") {
			t.Fatalf("round %d: r1 holds a %v, r2 %v; events %v", i+1, r1.Held("a"), r2.Held("a"), l.all())
		}
	}
	if rec, _ := replicaOf(t, base, "r1"); rec.Expires.Before(c.Now().Add(5 * time.Second)) {
		t.Fatalf("store says %+v at %v, want r1 renewing its record", rec, c.Now())
	}
	if got := l.all(); slices.Contains(got, "r1-a") {
		t.Fatalf("r1 lost a to its own writes: %v", got)
	}
}

// Adopting a renewal found in the store dates the lease from that
// renewal, not from the re-renewal whose outcome is again unknown: cut
// off afterwards, the replica lets go TTL - RenewEvery after the renewal
// it last saw confirmed.
func TestLostRepliesThenCutOffLetsGoByTheLastConfirmedRenewal(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	st := &lateAck{Store: memstore.New(c), key: replicaKey("r1")}
	l := &log{}
	r1 := replica(t, "r1", st, c, l)
	st.lose.Store(-1)
	c.Advance(5 * time.Second) // 0:05 renewal applied, reply lost
	c.Advance(5 * time.Second) // 0:10 read confirms the 0:05 renewal; re-renewal's reply lost
	if !r1.Held("a") {
		t.Fatalf("r1 let a go while its renewals were landing: %v", l.all())
	}
	st.down.Store(true)
	c.Advance(5 * time.Second) // 0:15 = 0:05 + TTL - RenewEvery
	if r1.Held("a") {
		t.Fatalf("r1 still holds a 10s after its last confirmed renewal: %v", l.all())
	}
	if !slices.Contains(l.all(), "r1-a") {
		t.Fatalf("r1 was not told it let a go: %v", l.all())
	}
}

// A lease record written by another holder, or gone, is a loss once the
// holder reads it back.
func TestConflictWithAnotherHolderIsALoss(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		write func(ctx context.Context, st store.Store, rev uint64, now time.Time) error
		want  string // holder left in the store; "" for none
	}{
		{"taken over", func(ctx context.Context, st store.Store, rev uint64, now time.Time) error {
			theirs, _ := json.Marshal(record{Holder: "r3", Expires: now.Add(time.Hour)})
			_, err := st.Update(ctx, key("a"), theirs, rev)
			return err
		}, "r3"},
		{"gone", func(ctx context.Context, st store.Store, rev uint64, now time.Time) error {
			return st.Delete(ctx, key("a"))
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := clock.NewFake(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
			st := memstore.New(c)
			l := &log{}
			r1 := replica(t, "r1", st, c, l)
			_, rev := holderOf(t, st, "a")
			if err := tc.write(context.Background(), st, rev, c.Now()); err != nil {
				t.Fatal(err)
			}
			c.Advance(verifyRounds * 5 * time.Second) // every held lease read back
			// A lease whose record is gone is free: r1's seeking round may
			// take it again at once, after letting the agent go.
			if (tc.want != "" && r1.Held("a")) || !slices.Contains(l.all(), "r1-a") {
				t.Fatalf("r1 holds a %v after losing it; events %v", r1.Held("a"), l.all())
			}
			if tc.want != "" {
				if rec, _ := holderOf(t, st, "a"); rec.Holder != tc.want {
					t.Fatalf("store says %+v, want %s's record untouched", rec, tc.want)
				}
			}
		})
	}
}
