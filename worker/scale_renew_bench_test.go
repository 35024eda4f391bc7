package worker

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/store"
)

// The lease renewals of the scale worker's phases. The worker renews its
// replica record once every lease.ttl/3 (5 s): too seldom in a phase of a
// few seconds to make a percentile. So beside the worker's own renewals
// (its agent_worker_lease_renew_seconds histogram, a reading before and
// after each phase) a probe makes the renewal's write — one Put of a key
// of its own — every renewProbeEvery through the renewal store
// (Worker.renewal, the lease manager's connection of its own), and for
// the anchor the same write through the store every other part of the
// worker uses: what a renewal would wait for had it shared the bulk
// traffic's connection, as it did before.

// renewProbeEvery is how often the probe writes, through each store.
const renewProbeEvery = 50 * time.Millisecond

// renewProbe writes through the renewal store and the shared one until
// end, timing each write.
type renewProbe struct {
	stop          chan struct{}
	wg            sync.WaitGroup
	mu            sync.Mutex
	own, shared   []time.Duration
	ownE, sharedE int // writes that failed (counted at their timeout)
}

// probeRenewals starts the probe on w.
func probeRenewals(w *Worker) *renewProbe {
	p := &renewProbe{stop: make(chan struct{})}
	for _, side := range []struct {
		st   store.Store
		key  string
		into *[]time.Duration
		errs *int
	}{{w.renewal, "bench.renewprobe.own", &p.own, &p.ownE}, {w.store, "bench.renewprobe.shared", &p.shared, &p.sharedE}} {
		p.wg.Go(func() {
			t := time.NewTicker(renewProbeEvery)
			defer t.Stop()
			for {
				select {
				case <-p.stop:
					return
				case <-t.C:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				t0 := time.Now()
				_, err := side.st.Put(ctx, side.key, []byte("x"))
				d := time.Since(t0)
				cancel()
				p.mu.Lock()
				*side.into = append(*side.into, d)
				if err != nil {
					*side.errs++
				}
				p.mu.Unlock()
			}
		})
	}
	return p
}

// end stops the probe and returns its writes' stats: through the renewal
// store, and through the shared one.
func (p *renewProbe) end() (own, shared durStat) {
	close(p.stop)
	p.wg.Wait()
	return statOf(p.own, p.ownE), statOf(p.shared, p.sharedE)
}

// durStat is a probe's writes: how many, how many failed, p99 and max.
type durStat struct {
	n, failed int
	p99, max  time.Duration
}

func statOf(ds []time.Duration, failed int) durStat {
	if len(ds) == 0 {
		return durStat{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(0.99*float64(len(s)))) - 1
	return durStat{n: len(s), failed: failed, p99: s[max(i, 0)], max: s[len(s)-1]}
}

// String renders the stat for the table: "p99 4ms, max 9ms (120)".
func (s durStat) String() string {
	if s.n == 0 {
		return "none"
	}
	f := ""
	if s.failed > 0 {
		f = fmt.Sprintf(", %d failed", s.failed)
	}
	return fmt.Sprintf("p99 %v, max %v (%d%s)", s.p99.Round(100*time.Microsecond), s.max.Round(100*time.Microsecond), s.n, f)
}

// renewPhase is one phase's renewals: the probe's, both ways, and the
// worker's own.
type renewPhase struct {
	own, shared durStat
	worker      renewStat
}

// renewals is the worker's renewal histogram: its cumulative count by
// bucket bound (le), both outcomes.
type renewals map[float64]float64

// readRenewals reads the worker's renewal histogram.
func readRenewals(b *testing.B, w *Worker) renewals {
	out := renewals{}
	for le, v := range metricLabelSums(b, w, "agent_worker_lease_renew_seconds_bucket", "le") {
		bound := math.Inf(1)
		if le != "+Inf" {
			f, err := strconv.ParseFloat(le, 64)
			if err != nil {
				continue
			}
			bound = f
		}
		out[bound] = v
	}
	return out
}

// renewStat is the worker's own renewals in a phase: how many, and the
// bucket bound the slowest falls under.
type renewStat struct {
	n       int
	slowest float64 // +Inf: above the largest bound
}

// since is the worker's renewals made after before.
func (r renewals) since(before renewals) renewStat {
	var bounds []float64
	for le := range r {
		bounds = append(bounds, le)
	}
	sort.Float64s(bounds)
	if len(bounds) == 0 {
		return renewStat{}
	}
	total := r[bounds[len(bounds)-1]] - before[bounds[len(bounds)-1]]
	st := renewStat{n: int(total)}
	for _, le := range bounds {
		if r[le]-before[le] >= total {
			st.slowest = le
			break
		}
	}
	return st
}

// String renders the stat for the table: "3, each ≤ 5ms".
func (s renewStat) String() string {
	switch {
	case s.n == 0:
		return "none"
	case math.IsInf(s.slowest, 1):
		return fmt.Sprintf("%d, the slowest > 10s", s.n)
	}
	return fmt.Sprintf("%d, each ≤ %gms", s.n, s.slowest*1000)
}

// renewGoal is the p99 a renewal's write must stay under in every phase:
// a tenth of the 10 s margin a lease ttl of 15 s leaves before a lapse
// lets every agent go.
const renewGoal = time.Second
