package worker

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The idle anchor: n bare sleeping agents, the least a process that keeps
// n agents owned with their state in NATS KV must do. Each is one
// goroutine parked on a timer (its next wake, an hour away) and one KV key
// — its lease — taken with a create and renewed with a compare-and-set
// update every leaseRenewEvery, 16 at a time, as the product's lease rounds
// do with the default ttl (15s, renewed every third of it). No turn
// state, no inbox, no router: what the product adds over this is its own.

// leaseRenewEvery is the product's lease renewal period with the default
// lease.ttl (15s ÷ 3), which the scale worker keeps.
const leaseRenewEvery = 5 * time.Second

// bareLanes is how many of the anchor's store writes are in flight at
// once, as the lease's roundWorkers.
const bareLanes = 16

// scaleBare measures the idle anchor on its own in-process nats-server:
// n bare sleeping agents (memory, goroutines, the time to take their
// leases, idle CPU).
func scaleBare(b *testing.B, o scaleOptions, l *laps) bareScale {
	var r bareScale
	nc, err := nats.Connect(natsExternal(b))
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "BARE"})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = js.DeleteKeyValue(ctx, "BARE") }()

	rss0, g0 := settledRSS(), runtime.NumGoroutine()
	stop := make(chan struct{})
	revs := make([]uint64, o.n)
	t0 := time.Now()
	lanes(o.n, func(i int) {
		rev, err := kv.Create(ctx, bareKey(i), bareLease(i))
		if err != nil {
			b.Errorf("bare lease %d: %v", i, err)
			return
		}
		revs[i] = rev
		go func() {
			t := time.NewTimer(time.Hour)
			defer t.Stop()
			select {
			case <-t.C:
			case <-stop:
			}
		}()
	})
	r.createAll = time.Since(t0)

	var renewals atomic.Int64
	renewing := make(chan struct{})
	go func() {
		defer close(renewing)
		tick := time.NewTicker(leaseRenewEvery)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			lanes(o.n, func(i int) {
				if rev, err := kv.Update(ctx, bareKey(i), bareLease(i), revs[i]); err == nil {
					revs[i] = rev
					renewals.Add(1)
				}
			})
		}
	}()
	time.Sleep(time.Second) // settle
	r.rssPerAgent = float64(int64(settledRSS())-int64(rss0)) / float64(o.n)
	r.goroutinesPer = float64(runtime.NumGoroutine()-g0-1) / float64(o.n)
	r0, i0 := renewals.Load(), time.Now()
	r.idleCPU = idleCPU(o.idle)
	r.renewalsPerSec = float64(renewals.Load()-r0) / time.Since(i0).Seconds()
	close(stop)
	<-renewing
	l.mark("bare idle agents")
	return r
}

// lanes runs f(0) … f(n-1), bareLanes at a time, and returns when all
// have returned.
func lanes(n int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range bareLanes {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		})
	}
	wg.Wait()
}

func bareKey(i int) string { return fmt.Sprintf("lease.b%05d", i) }

// bareLease is a record the size of the product's lease record.
func bareLease(i int) []byte {
	return fmt.Appendf(nil, `{"holder":"bare-%05d","expires":%q}`, i, time.Now().Add(15*time.Second).Format(time.RFC3339Nano))
}
