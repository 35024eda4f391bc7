package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// counting counts the writes that reach the store.
type counting struct {
	store.Store
	writes atomic.Int64
}

func (c *counting) Update(ctx context.Context, k string, v []byte, rev uint64) (uint64, error) {
	c.writes.Add(1)
	return c.Store.Update(ctx, k, v, rev)
}

func (c *counting) Create(ctx context.Context, k string, v []byte, ttl time.Duration) (uint64, error) {
	c.writes.Add(1)
	return c.Store.Create(ctx, k, v, ttl)
}

// A replica holding many leases writes one record per renewal, not one
// per lease: 10,000 sleeping agents once cost 2,000 writes a second.
func TestHoldingLeasesCostsOneWritePerRenewal(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	st := &counting{Store: memstore.New(c)}
	agents := make([]string, 200)
	for i := range agents {
		agents[i] = fmt.Sprintf("agent-%03d", i)
	}
	m, err := New(agents, Options{Store: st, Clock: c, Holder: "r1", TTL: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	m.Start(context.Background())
	t.Cleanup(func() { m.Stop(context.Background()) })
	if n := len(m.HeldAgents()); n != len(agents) {
		t.Fatalf("r1 holds %d leases, want %d", n, len(agents))
	}
	before := st.writes.Load()
	const rounds = 12
	c.Advance(rounds * 5 * time.Second)
	if n := len(m.HeldAgents()); n != len(agents) {
		t.Fatalf("r1 holds %d leases after %d renewals, want %d", n, rounds, len(agents))
	}
	if w := st.writes.Load() - before; w != rounds {
		t.Fatalf("%d writes over %d renewals of %d leases; want one per renewal", w, rounds, len(agents))
	}
}

// A replica that could not renew its record for TTL - RenewEvery lets its
// agents go; once the store answers again it takes back the leases that
// still name it, without waiting for them to expire.
func TestAReplicaBackFromAnOutageTakesBackItsLeases(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	st := &cut{Store: memstore.New(c)}
	l := &log{}
	r1 := replica(t, "r1", st, c, l)
	st.down.Store(true)
	c.Advance(10 * time.Second)
	if r1.Held("a") {
		t.Fatal("r1 still holds a after 10s without a renewal")
	}
	st.down.Store(false)
	c.Advance(5 * time.Second)
	if !r1.Held("a") || !r1.Held("b") {
		t.Fatalf("r1 did not take its leases back at the first renewal after the outage: %v", l.all())
	}
	got := l.all()
	if want := []string{"r1+a", "r1+b", "r1-a", "r1-b", "r1+a", "r1+b"}; !slices.Equal(sortedPairs(got), want) {
		t.Fatalf("events %v, want %v (each pair in any order)", got, want)
	}
}

// sortedPairs sorts each consecutive pair of events (a round works on
// agents in parallel).
func sortedPairs(ev []string) []string {
	out := slices.Clone(ev)
	for i := 0; i+1 < len(out); i += 2 {
		slices.Sort(out[i : i+2])
	}
	return out
}

// Stop deletes the replica's record after releasing its leases: a lease it
// could not release is free at once rather than after the TTL.
func TestStopDeletesTheReplicaRecord(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	st := memstore.New(c)
	l := &log{}
	r1 := replica(t, "r1", st, c, l)
	replicaOf(t, st, "r1")
	r1.Stop(context.Background())
	if _, err := st.Get(context.Background(), replicaKey("r1")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("r1's record after Stop: %v, want gone", err)
	}
	// A lease still naming r1 (its release failed) is free for r2 at once.
	mine, _ := json.Marshal(record{Holder: "r1", Expires: heldForever, Replica: true})
	_, rev := holderOf(t, st, "a")
	if _, err := st.Update(context.Background(), key("a"), mine, rev); err != nil {
		t.Fatal(err)
	}
	r2 := replica(t, "r2", st, c, l)
	if !r2.Held("a") {
		t.Fatalf("r2 did not take a lease whose holder's record is gone: %v", l.all())
	}
}

// Leases written by an older version (no replica record: they last until
// their expiry) are honoured until they expire; a lease taken now never
// expires for an older version, which knows nothing of replica records.
func TestLeasesOfAnOlderVersionLastUntilTheirExpiry(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	st := memstore.New(c)
	old, _ := json.Marshal(record{Holder: "old", Expires: c.Now().Add(12 * time.Second)})
	if _, err := st.Create(context.Background(), key("a"), old, 0); err != nil {
		t.Fatal(err)
	}
	l := &log{}
	r1 := replica(t, "r1", st, c, l)
	if r1.Held("a") || !r1.Held("b") {
		t.Fatalf("r1 holds a %v, b %v; want b only while the old lease on a lives", r1.Held("a"), r1.Held("b"))
	}
	c.Advance(15 * time.Second)
	if !r1.Held("a") {
		t.Fatal("r1 did not take a once the old lease expired")
	}
	rec, _ := holderOf(t, st, "a")
	if !rec.Replica || rec.Expires.Before(c.Now().AddDate(100, 0, 0)) {
		t.Fatalf("a lease taken now reads %+v; an older version would take it when it expires", rec)
	}
}

// Every holder name maps to a store key of its own, made of key tokens.
func TestReplicaKeys(t *testing.T) {
	t.Parallel()
	seen := map[string]string{}
	for _, h := range []string{"worker-0", "Worker-0", "worker.0", "_776f726b65722e30", "x y", "pod_1", "ü"} {
		k := replicaKey(h)
		if prev, dup := seen[k]; dup {
			t.Fatalf("holders %q and %q share the key %s", prev, h, k)
		}
		seen[k] = h
		if strings.Count(k, ".") != 1 || strings.ContainsAny(k, " *>") {
			t.Fatalf("holder %q: key %q is not two key tokens", h, k)
		}
	}
}
