package lease

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// slowStore answers each lease read and write after a round trip's
// latency, like a store across a network.
type slowStore struct {
	store.Store
	latency time.Duration
	updates atomic.Int64 // of replica records
}

func (s *slowStore) Get(ctx context.Context, key string) (store.Entry, error) {
	time.Sleep(s.latency)
	return s.Store.Get(ctx, key)
}

func (s *slowStore) Create(ctx context.Context, key string, v []byte, ttl time.Duration) (uint64, error) {
	time.Sleep(s.latency)
	return s.Store.Create(ctx, key, v, ttl)
}

func (s *slowStore) Update(ctx context.Context, key string, v []byte, rev uint64) (uint64, error) {
	time.Sleep(s.latency)
	if strings.HasPrefix(key, "leasereplica.") {
		s.updates.Add(1)
	}
	return s.Store.Update(ctx, key, v, rev)
}

// A replica holding many leases keeps them all over a slow store while a
// standby seeks them every round: once, a round renewed every lease one
// after another (here 300 × 8 ms, longer than the 2 s TTL), so a standby
// took leases whose holder had not let go yet: two owners at once. Now
// one record per replica is renewed, and the standby must see it live.
func TestManyLeasesAreRenewedInTimeOverASlowStore(t *testing.T) {
	t.Parallel()
	const n = 300
	agents := make([]string, n)
	for i := range agents {
		agents[i] = fmt.Sprintf("agent-%03d", i)
	}
	mem := memstore.New(nil)
	var acquired, lost [2]atomic.Int64
	stores := [2]*slowStore{{Store: mem, latency: 8 * time.Millisecond}, {Store: mem, latency: 8 * time.Millisecond}}
	var ms [2]*Manager
	for i := range ms {
		m, err := New(agents, Options{Store: stores[i], Holder: fmt.Sprintf("r%d", i+1), TTL: 2 * time.Second, RenewEvery: 500 * time.Millisecond,
			OnAcquire: func(string, Gain) { acquired[i].Add(1) },
			OnLose:    func(string, Reason) { lost[i].Add(1) },
		})
		if err != nil {
			t.Fatal(err)
		}
		ms[i] = m
	}
	ms[0].Start(t.Context()) // r1 takes every lease, then r2 stands by
	t.Cleanup(func() { ms[0].Stop(context.Background()) })
	if got := acquired[0].Load(); got != n {
		t.Fatalf("r1 took %d leases, want %d", got, n)
	}
	ms[1].Start(t.Context())
	t.Cleanup(func() { ms[1].Stop(context.Background()) })
	// r1's renewals over more than four TTLs.
	want := stores[0].updates.Load() + 20
	end := time.Now().Add(time.Minute)
	for stores[0].updates.Load() < want {
		if a := acquired[1].Load(); a > 0 {
			t.Fatalf("the standby took %d leases r1 still held: renewals did not keep up with the TTL", a)
		}
		if time.Now().After(end) {
			t.Fatalf("r1 made %d renewals, want %d", stores[0].updates.Load(), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if a, l := acquired[1].Load(), lost[0].Load(); a != 0 || l != 0 {
		t.Fatalf("the standby took %d leases and r1 lost %d: renewals did not keep up with the TTL", a, l)
	}
	for _, a := range agents {
		if !ms[0].Held(a) || ms[1].Held(a) {
			t.Fatalf("%s: r1 holds %v, r2 holds %v", a, ms[0].Held(a), ms[1].Held(a))
		}
	}
}
