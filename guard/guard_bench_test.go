package guard_test

// BenchmarkGuardChargePath measures what the guard costs a model call and
// a turn, with the ledger stored in a real JetStream KV bucket (an
// in-process nats-server, file storage) and in the memory store, against
// a bare anchor: an in-memory ledger update under a per-agent mutex with
// the same ceiling checks and no store at all. Run it with -benchtime 1x
// (make bench does); it prints a table.
//
// Rows:
//   - one agent, sequential turns: time per model call and per turn, and
//     store writes per turn (a counting wrapper around the store);
//   - 100 agents charging concurrently: turns per second across them, and
//     store writes per turn.
//
// Each turn is BeginTurn, callsPerTurn × (before + after model callback,
// $0.0001 each), EndTurn: the guard's whole share of a turn.

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/adk/model"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memstore"
	"github.com/agent-worker/agent-worker/store/natskv"
)

const (
	benchCallsPerTurn = 4
	benchAgents       = 100
)

// countingStore counts the store's round trips.
type countingStore struct {
	store.Store
	puts, gets atomic.Int64
}

func (c *countingStore) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	c.puts.Add(1)
	return c.Store.Put(ctx, key, value)
}

func (c *countingStore) Get(ctx context.Context, key string) (store.Entry, error) {
	c.gets.Add(1)
	return c.Store.Get(ctx, key)
}

// nopStore discards writes: the guard's own cost, without a store.
type nopStore struct{ store.Store }

func (nopStore) Put(context.Context, string, []byte) (uint64, error) { return 1, nil }

// cpuTime is the process's user+system CPU time so far (the in-process
// nats-server's included, as in the embedded default).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func natsStore(b *testing.B) store.Store {
	b.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: b.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		b.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		b.Fatal("nats-server not ready")
	}
	b.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	st, err := natskv.Open(context.Background(), js, natskv.Options{Bucket: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// benchTurner runs one agent's turns.
type benchTurner interface {
	turn(agent string)
}

type guardTurner struct {
	g      *guard.Guard
	before map[string]func() error
	after  map[string]func() error
}

func newGuardTurner(b *testing.B, st store.Store, agents int) *guardTurner {
	b.Helper()
	c := clock.NewFake(epoch)
	g := guard.New(guard.Options{Store: st, Clock: c, Prices: guard.NewPrices(map[string]config.Price{"priced-1": {InputPerMTok: 10}}),
		WorkerDailyUSD: 1e9})
	gt := &guardTurner{g: g, before: map[string]func() error{}, after: map[string]func() error{}}
	resp := &model.LLMResponse{UsageMetadata: &genai.GenerateContentResponseUsageMetadata{PromptTokenCount: 10}} // $0.0001
	for i := range agents {
		name := fmt.Sprintf("a%d", i)
		g.AddAgent(name, "priced-1", guard.Limits{TurnUSD: 1e6, SessionUSD: 1e6, DailyUSD: 1e6})
		if err := g.Restore(context.Background(), name); err != nil {
			b.Fatal(err)
		}
		p := g.Plugin(name)
		bm, am := p.BeforeModelCallback(), p.AfterModelCallback()
		gt.before[name] = func() error { _, err := bm(nil, &model.LLMRequest{}); return err }
		gt.after[name] = func() error { _, err := am(nil, resp, nil); return err }
	}
	return gt
}

func (gt *guardTurner) turn(agent string) {
	gt.g.BeginTurn(agent, hook.TurnInfo{})
	before, after := gt.before[agent], gt.after[agent]
	for range benchCallsPerTurn {
		if err := before(); err != nil {
			panic(err)
		}
		if err := after(); err != nil {
			panic(err)
		}
	}
	gt.g.EndTurn(agent)
}

// bareTurner is the anchor: a ledger per agent under its own mutex, the
// same additions and comparisons, nothing stored.
type bareTurner struct {
	mu      sync.Mutex
	ledgers map[string]*bareLedger
	worker  struct {
		sync.Mutex
		spent float64
	}
}

type bareLedger struct {
	mu                        sync.Mutex
	turn, session, day        float64
	calls, tokens             int
	turnCap, sessCap, dailyCp float64
}

func newBareTurner(agents int) *bareTurner {
	bt := &bareTurner{ledgers: map[string]*bareLedger{}}
	for i := range agents {
		bt.ledgers[fmt.Sprintf("a%d", i)] = &bareLedger{turnCap: 1e6, sessCap: 1e6, dailyCp: 1e6}
	}
	return bt
}

var bareSink atomic.Int64

func (bt *bareTurner) turn(agent string) {
	bt.mu.Lock()
	l := bt.ledgers[agent]
	bt.mu.Unlock()
	l.mu.Lock()
	l.turn, l.calls, l.tokens = 0, 0, 0
	l.mu.Unlock()
	for range benchCallsPerTurn {
		l.mu.Lock()
		l.calls++
		l.mu.Unlock()
		cost := 10 * 10.0 / 1e6
		l.mu.Lock()
		l.turn += cost
		l.session += cost
		l.day += cost
		l.tokens += 10
		bt.worker.Lock()
		bt.worker.spent += cost
		crossed := bt.worker.spent >= 1e9
		bt.worker.Unlock()
		if crossed || l.turn >= l.turnCap || l.session >= l.sessCap || l.day >= l.dailyCp {
			bareSink.Add(1)
		}
		l.mu.Unlock()
	}
}

func runSequential(tr benchTurner, turns int) time.Duration {
	for range 50 { // warm up
		tr.turn("a0")
	}
	t0 := time.Now()
	for range turns {
		tr.turn("a0")
	}
	return time.Since(t0)
}

func runConcurrent(tr benchTurner, agents, turnsEach int) time.Duration {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range agents {
		name := fmt.Sprintf("a%d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for range turnsEach {
				tr.turn(name)
			}
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	return time.Since(t0)
}

func BenchmarkGuardChargePath(b *testing.B) {
	const seqTurns, turnsEach = 2000, 100
	for range b.N {
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "guard charge path (%d model calls a turn)\tper call\tper turn\tturns/s\tCPU/turn\tstore writes/turn\tvs bare\t\n", benchCallsPerTurn)

		// One agent, sequential.
		cpu0 := cpuTime()
		bare := runSequential(newBareTurner(1), seqTurns)
		cpu := cpuTime() - cpu0
		row := func(name string, d, cpu time.Duration, turns int, puts int64, anchor time.Duration) {
			perTurn := d / time.Duration(turns)
			fmt.Fprintf(tw, "%s\t%v\t%v\t%.0f\t%v\t%.2f\t%.1f×\t\n", name, (perTurn / benchCallsPerTurn).Round(10*time.Nanosecond),
				perTurn.Round(10*time.Nanosecond), float64(turns)/d.Seconds(), (cpu / time.Duration(turns)).Round(10*time.Nanosecond),
				float64(puts)/float64(turns), float64(d)/float64(anchor))
		}
		row("1 agent: bare in-memory ledger (anchor)", bare, cpu, seqTurns, 0, bare)
		kinds := []string{"writes discarded", "memory", "nats-kv"}
		newStore := func(kind string) store.Store {
			switch kind {
			case "memory":
				return memstore.New(clock.NewFake(epoch))
			case "nats-kv":
				return natsStore(b)
			}
			return nopStore{memstore.New(clock.NewFake(epoch))}
		}
		for _, kind := range kinds {
			cs := &countingStore{Store: newStore(kind)}
			gt := newGuardTurner(b, cs, 1)
			for range 50 {
				gt.turn("a0")
			}
			cs.puts.Store(0)
			cpu0 := cpuTime()
			t0 := time.Now()
			for range seqTurns {
				gt.turn("a0")
			}
			d := time.Since(t0)
			cpu := cpuTime() - cpu0
			flush(b, gt.g)
			row("1 agent: guard, "+kind+" store", d, cpu, seqTurns, cs.puts.Load(), bare)
		}

		// 100 agents at once.
		total := benchAgents * turnsEach
		cpu0 = cpuTime()
		bare = runConcurrent(newBareTurner(benchAgents), benchAgents, turnsEach)
		cpu = cpuTime() - cpu0
		row(fmt.Sprintf("%d agents: bare in-memory ledger (anchor)", benchAgents), bare, cpu, total, 0, bare)
		for _, kind := range kinds {
			cs := &countingStore{Store: newStore(kind)}
			gt := newGuardTurner(b, cs, benchAgents)
			cs.puts.Store(0)
			cpu0 := cpuTime()
			d := runConcurrent(gt, benchAgents, turnsEach)
			cpu := cpuTime() - cpu0
			flush(b, gt.g)
			row(fmt.Sprintf("%d agents: guard, %s store", benchAgents, kind), d, cpu, total, cs.puts.Load(), bare)
			if kind == "nats-kv" {
				b.ReportMetric(float64(total)/d.Seconds(), "nats-kv-turns/s")
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(total), "nats-kv-cpu-ns/turn")
			}
		}
		tw.Flush()
	}
}

// flush writes what the guard still holds (the old guard wrote as it
// went and has nothing to flush).
func flush(b *testing.B, g *guard.Guard) {
	b.Helper()
	if f, ok := any(g).(interface{ Flush(context.Context) error }); ok {
		if err := f.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}
