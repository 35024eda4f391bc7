package worker

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// What BenchmarkScale reads of the process, the stream and the worker,
// and how it waits: every wait here is bounded.

// laps records how long each phase took, for the line under the table.
type laps struct {
	t    time.Time
	list []string
}

func (l *laps) mark(what string) {
	now := time.Now()
	if !l.t.IsZero() {
		l.list = append(l.list, fmt.Sprintf("%s %v", what, now.Sub(l.t).Round(100*time.Millisecond)))
	}
	l.t = now
}

// settledRSS returns the process's VmRSS in bytes after a GC that
// returns freed memory to the OS.
func settledRSS() uint64 {
	debug.FreeOSMemory()
	time.Sleep(100 * time.Millisecond)
	debug.FreeOSMemory()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// settledHeap is HeapAlloc after the last turn's writes had 200ms to
// land: the least of three readings 100ms apart, each after a GC, so that
// a burst of garbage still referenced (a request in flight, a renewal
// round's buffers) counts less.
func settledHeap() float64 {
	time.Sleep(200 * time.Millisecond)
	least := uint64(math.MaxUint64)
	for i := range 3 {
		if i > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		least = min(least, ms.HeapAlloc)
	}
	return float64(least)
}

// writeProfile writes the named runtime profile ("heap", "goroutine")
// to dir/file when dir is set (an AW_SCALE_* knob); debugLevel as in
// pprof.Profile.WriteTo. A failure is reported, not fatal: it may run
// off the benchmark's goroutine.
func writeProfile(b *testing.B, dir, file, name string, debugLevel int) {
	if dir == "" {
		return
	}
	f, err := os.Create(filepath.Join(dir, file))
	if err != nil {
		b.Error(err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup(name).WriteTo(f, debugLevel); err != nil {
		b.Error(err)
	}
}

// profileCPU profiles the process's CPU into dir/file, when dir is set
// (an AW_SCALE_* knob), until the returned stop is called.
func profileCPU(b *testing.B, dir, file string) (stop func()) {
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, file))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// cpuTime is the process's user + system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// idleCPU is the process's CPU over d, as % of one core.
func idleCPU(d time.Duration) float64 {
	c0, t0 := cpuTime(), time.Now()
	time.Sleep(d)
	return 100 * float64(cpuTime()-c0) / float64(time.Since(t0))
}

// cpuQuiet waits until the process used, over 250ms, less than twice
// idle % (at least 5%) of one core, or until end.
func cpuQuiet(idle float64, end time.Time) {
	limit := max(5, 2*idle) / 100
	for time.Now().Before(end) {
		c0, t0 := cpuTime(), time.Now()
		time.Sleep(250 * time.Millisecond)
		if float64(cpuTime()-c0) < limit*float64(time.Since(t0)) {
			return
		}
	}
}

// streamMsgs is how many messages the stream holds now (-1 if unknown).
func streamMsgs(js jetstream.JetStream, name string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil {
		return -1
	}
	info, err := s.Info(ctx)
	if err != nil {
		return -1
	}
	return int64(info.State.Msgs)
}

// waitStreamBack waits, polling every 20ms, until the stream holds no
// more messages than before (what was added has been purged); false
// when timeout passed first.
func waitStreamBack(js jetstream.JetStream, name string, before int64, timeout time.Duration) bool {
	end := time.Now().Add(timeout)
	for time.Now().Before(end) {
		if n := streamMsgs(js, name); n >= 0 && n <= before {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// waitCount waits until count() reaches want, gives up after stall
// without progress or after timeout.
func waitCount(count func() int64, want int64, stall, timeout time.Duration) {
	end := time.Now().Add(timeout)
	last, lastAt := int64(-1), time.Now()
	for {
		c := count()
		if c >= want || time.Now().After(end) {
			return
		}
		if c != last {
			last, lastAt = c, time.Now()
		} else if time.Since(lastAt) > stall {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// publishBurst publishes m short messages with core NATS (no
// Nats-Msg-Id: nothing is kept for a duplicate window once handled),
// message i on subject(i % agents), flushing every 500 so the client's
// buffer stays bounded.
func publishBurst(b *testing.B, nc *nats.Conn, m, agents int, subject func(int) string) {
	for i := range m {
		if err := nc.Publish(subject(i%agents), []byte("alert "+strconv.Itoa(i))); err != nil {
			b.Fatal(err)
		}
		if i%500 == 499 {
			if err := nc.Flush(); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := nc.Flush(); err != nil {
		b.Fatal(err)
	}
}

// waitReady polls /readyz every 10ms until it answers 200; it returns
// the time since start (when Start was called), or 0 on timeout.
func waitReady(w *Worker, start time.Time, timeout time.Duration) time.Duration {
	t0 := time.Now()
	url := "http://" + w.APIAddr() + "/readyz"
	c := &http.Client{Timeout: 2 * time.Second}
	for time.Since(t0) < timeout {
		if resp, err := c.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(start)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return 0
}

// waitRestored waits until every agent the worker owns has its state
// restored, or timeout; it returns how many are and when.
func waitRestored(w *Worker, timeout time.Duration) (int, time.Time) {
	end := time.Now().Add(timeout)
	for {
		restored, agents := 0, w.Driver().Agents()
		for _, a := range agents {
			if !a.Standby() && a.Restored() {
				restored++
			}
		}
		if restored == len(agents) || time.Now().After(end) {
			return restored, time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitOwned waits until the worker owns (holds the lease of, out of
// standby) every one of its agents, or the count stops growing for 5s,
// or timeout; it returns how many it owns and when.
func waitOwned(w *Worker, timeout time.Duration) (int, time.Time) {
	end := time.Now().Add(timeout)
	last, lastAt := -1, time.Now()
	for {
		agents := w.Driver().Agents()
		owned := 0
		for _, a := range agents {
			if !a.Standby() {
				owned++
			}
		}
		if owned == len(agents) {
			return owned, time.Now()
		}
		if owned != last {
			last, lastAt = owned, time.Now()
		}
		if time.Now().After(end) || time.Since(lastAt) > 5*time.Second {
			return owned, time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stopWithin stops w, waiting at most d for Stop to return (a replica
// whose NATS was cut may take long); it returns how long it waited.
func stopWithin(w *Worker, d time.Duration) time.Duration {
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Stop(ctx)
	}()
	select {
	case <-done:
	case <-time.After(d + 5*time.Second):
	}
	return time.Since(t0)
}

func envInt(b *testing.B, name string, def int) int {
	return env(b, name, def, strconv.Atoi, "a positive integer")
}

func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	return env(b, name, def, time.ParseDuration, "a positive duration")
}

// env is the environment variable name parsed, or def when it is unset.
func env[T int | time.Duration](b *testing.B, name string, def T, parse func(string) (T, error), want string) T {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	x, err := parse(v)
	if err != nil || x <= 0 {
		b.Fatalf("%s=%q: want %s", name, v, want)
	}
	return x
}

// errorCounter is a slog handler that counts ERROR records and keeps the
// first one's agent and the end of its error.
type errorCounter struct {
	count atomic.Int64
	mu    sync.Mutex
	first string
}

func (h *errorCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }

func (h *errorCounter) Handle(_ context.Context, r slog.Record) error {
	if h.count.Add(1) == 1 {
		agent, why := "", r.Message
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "agent":
				agent = a.Value.String()
			case "error":
				why = r.Message + ": " + a.Value.String()
			}
			return true
		})
		why = clipEnd(why, 90)
		h.mu.Lock()
		h.first = fmt.Sprintf("%s: %s", agent, why)
		h.mu.Unlock()
	}
	return nil
}

func (h *errorCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *errorCounter) WithGroup(string) slog.Handler      { return h }

func (h *errorCounter) firstMsg() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.first
}

// storeOpsByOp is the worker's agent_worker_store_operations_total by op
// (every outcome).
func storeOpsByOp(b *testing.B, w *Worker) map[string]float64 {
	return metricLabelSums(b, w, "agent_worker_store_operations_total", "op")
}

// opsSince is, by op, what storeOpsByOp counts now beyond before.
func opsSince(b *testing.B, w *Worker, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for op, v := range storeOpsByOp(b, w) {
		if d := v - before[op]; d > 0 {
			out[op] = d
		}
	}
	return out
}
