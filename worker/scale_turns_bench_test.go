package worker

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// The one-message turns: o.turns messages round-robin to the
// scaleBurstAgents agents after the burst's (inbox cap 1), so that each
// turn handles one message (mostly: one may be read while a turn
// records). Counted until the process is quiet again: the CPU, the store's
// round trips by op (to whole lease renewal periods), and the heap.

// singleAgent is the i-th agent of the one-message turns.
func singleAgent(i int) string { return scaleAgent(scaleBurstAgents + 1 + i) }

// scaleTurns runs the one-message turns on a quiet worker.
func scaleTurns(b *testing.B, o scaleOptions, w *Worker, nc *nats.Conn, c *scaleCounts, r *prodScale) {
	c.quiet(r.idleCPU)
	h0, t0 := c.handled.Load(), c.turns.Load()
	heap0 := settledHeap()
	ops0 := storeOpsByOp(b, w)
	stopProfile := profileCPU(b, o.cpuDir, "turns-cpu.pprof")
	cpu0 := cpuTime()
	start := time.Now()
	publishBurst(b, nc, o.turns, scaleBurstAgents, func(i int) string { return "agents." + singleAgent(i) + ".inbox" })
	waitCount(func() int64 { return c.handled.Load() - h0 }, int64(o.turns), 10*time.Second, 120*time.Second)
	r.singleTime = time.Since(start)
	c.quiet(r.idleCPU)
	r.singleCPU, r.singleCPUTime = cpuTime()-cpu0, time.Since(start)
	stopProfile()
	r.singleHandled = c.handled.Load() - h0
	r.singleTurns = c.turns.Load() - t0
	// The store's count runs on to whole lease renewal periods, so that it
	// holds as many renewal rounds as the idle rate accounts for: a round
	// renews every lease at once, and a window that held one round more or
	// less would be off by N ops.
	if part := time.Since(start) % leaseRenewEvery; part > 0 {
		time.Sleep(leaseRenewEvery - part)
	}
	r.singleOps, r.singleOpsTime = opsSince(b, w, ops0), time.Since(start)
	r.singleHeap = settledHeap() - heap0
}

// leaseOp is the store op of the leases alone: package lease is the only
// caller of Store.Update (renewals, take-overs, releases); no turn does
// one.
const leaseOp = "update"

// opsPerTurn is, by op, the store's round trips over the one-message
// turns less what the idle rate accounts for in the same time, per turn,
// and their sum without leaseOp. The lease's renewal rounds slip under
// load (a round due while the last one runs starts late), so its idle rate
// does not take off cleanly: shown by op, not summed.
func (r *prodScale) opsPerTurn() (map[string]float64, float64) {
	turns := float64(max(r.singleTurns, 1))
	ops := map[string]float64{}
	maps.Copy(ops, r.singleOps)
	for op := range r.idleOps {
		ops[op] += 0
	}
	sum := 0.0
	for op, n := range ops {
		ops[op] = (n - r.idleOps[op]*r.singleOpsTime.Seconds()) / turns
		if op != leaseOp {
			sum += ops[op]
		}
	}
	return ops, sum
}

// opsRaw is the sum of the store's round trips over the one-message
// turns, per turn, the idle rate not taken off.
func (r *prodScale) opsRaw() float64 {
	sum := 0.0
	for _, n := range r.singleOps {
		sum += n
	}
	return sum / float64(max(r.singleTurns, 1))
}

// sortedOps returns m's keys, sorted.
func sortedOps(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for op := range m {
		out = append(out, op)
	}
	slices.Sort(out)
	return out
}

// cpuPerTurn is the CPU of the one-message turns less what the idle rate
// accounts for in the same time, per turn.
func (r *prodScale) cpuPerTurn() time.Duration {
	idle := time.Duration(r.idleCPU / 100 * float64(r.singleCPUTime))
	return per(r.singleCPU-idle, r.singleTurns)
}
