package worker

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
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

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/models/scripted"
)

// BenchmarkScale prints, in one run and one process, the rows of issue
// 16's goals table that can be measured here, each next to a bare
// JetStream anchor measured in the same process, and their ratio. Run it
// with -benchtime 1x. Method, row by row:
//
//   - agents that work: a worker with N agents (scripted model, embedded
//     nats-server, nats:// KV store, one replica) gets one message on each
//     agent's inbox subject; an agent works when its message was handled
//     (a message-handled event) before 5s pass without progress. Sub-rows:
//     of the agents given no other message, those whose probe was handled
//     by the end of the run (late, not dead); "waiting" events (agents
//     told a dependency is down) during the probe; agents whose two
//     consumers exist on the input stream (stream info's consumer count,
//     (count−1)/2); the first agent that did not work; the ERROR lines
//     the worker logged (bind failures). Nothing here fails the
//     benchmark.
//   - RSS per idle agent: VmRSS (/proc/self/status) read after
//     debug.FreeOSMemory (a GC that also returns free pages to the OS) and
//     one second of quiet: (worker with N agents − worker with 1 agent,
//     started and stopped just before) ÷ (N−1). Anchor: on a separate
//     in-process nats-server, (N durable consumers each with a running
//     jetstream.Consume, MaxAckPending 256 like an agent's − the server
//     with its stream) ÷ N: one bare consumer per agent (an agent has
//     two, wake and deferred). Both include the in-process server's side
//     of each consumer. Noise: a few MB of RSS either way (fragmentation,
//     the scavenger, goroutine stacks, other tests on the machine), i.e.
//     a few KB per agent at 1,000 agents. The goroutine sub-row is
//     counted the same way.
//   - start to ready: worker.Start called → GET /readyz answers 200
//     (polled every 10ms). Anchor: creating the N bare consumers and
//     starting their Consume. Sub-row: → every agent's consumers exist.
//   - idle CPU: user+system CPU time of the process (getrusage) over the
//     idle window with every agent asleep, as % of one core. Anchor: the
//     N idle bare consumers, same window.
//   - heap growth per handled message: HeapAlloc after runtime.GC before
//     and after the last burst below (its agents warm: a second round),
//     ÷ messages handled; sub-rows: the same around the first burst
//     (fresh agents, whose inboxes, id memories and the server's caches
//     grow once) and around the one-message turns, ÷ turns. AW_SCALE_HEAP
//     writes heap profiles around the first burst. The anchor is 0
//     (an ack-only consumer keeps nothing per message). The in-process
//     nats-server's heap (block caches, the KV's per-key index) counts
//     too, as it does in an embedded deployment.
//   - burst: M messages published round-robin (core publish, flushed
//     every 500) on the inbox subjects of 100 agents (inbox cap 256),
//     from the first publish until every one was acked: the input stream
//     has interest retention, so it is back to the count it held before
//     (the worker acks a message only after its turn is recorded; the
//     sub-row gives the rate to the last message-handled event, which
//     comes earlier). Anchor: 100 durable consumers on a stream of their
//     own (also interest retention) on the worker's nats-server
//     (MaxAckPending 256) that only ack, the same publisher, until that
//     stream is back likewise. (That stream has 100 consumers; the
//     worker's has 2N+1, and the server checks every consumer's interest
//     on each ack.) Worker and anchor alternate, twice each by default,
//     each round followed by waiting, uncounted, until the process is
//     quiet (no worker event for 500ms, then 250ms using under max(5%,
//     2× idle) of a core; at most 10s; a sub-row says how long) so the
//     next runs alone. The first round finds
//     fresh agents; the second, the same agents with the history and
//     handled-message records of the first (memory folds are counted).
//   - CPU per turn: AW_SCALE_TURNS (1,000) messages round-robin to 100
//     other agents whose inbox cap is 1, so that each turn handles one
//     message: the process's CPU time until it is quiet again ÷ their
//     turns. Sub-rows: the bursts' CPU time (until the last ack) ÷ their
//     turns (a turn drains every waiting message, so a burst turn handles
//     many) and ÷ their messages. Anchor: the bare bursts' CPU time (until
//     the last ack) ÷ messages.
//   - store round trips per turn: agent_worker_store_operations_total
//     over the one-message turns (until quiet) ÷ their turns, less what
//     the store serves while every agent sleeps (lease renewals, health
//     probes: the rate over the idle window). It counts background writes
//     (the turn summary, the handled-id record) too, so it bounds the
//     synchronous ones from above. Sub-rows: without the idle rate taken
//     off, and by op.
//   - Worker.Stop: AW_SCALE_STOPDUMP=DIR writes the goroutines 5s into it
//     (DIR/stop-goroutines.txt). With the embedded server most of it is
//     nats-server's own shutdown stopping the stream's 2N+1 consumers one
//     after another, each waiting ~10ms for its state flusher.
//   - Not goals, printed because they bound the run: how often agents
//     were told to wait because a dependency was reported down (whole
//     run), and how long Worker.Stop takes.
//
// Everything runs in this one process, the nats-servers too, so CPU and
// RSS include the server's share for product and anchor alike. The
// machine is shared: the ratios within one run are what to read.
//
// Defaults: 1,000 agents, 20,000-message bursts, 1,000 one-message
// turns, a 3s idle window: about a minute and a half, a third of it
// Worker.Stop. The goals' 10,000 agents, by hand:
//
//	AW_SCALE_AGENTS=10000 go test -run '^$' -bench BenchmarkScale -benchtime 1x -timeout 30m ./worker/
//
// (about ten minutes and 3.5 GB of RSS with the tree of this writing,
// four of the minutes in Worker.Stop). AW_SCALE_BURST, AW_SCALE_ROUNDS
// (2), AW_SCALE_TURNS and AW_SCALE_IDLE (a duration) set the rest;
// AW_SCALE_ROUNDS=1 saves a third of the default run.
func BenchmarkScale(b *testing.B) {
	n := envInt(b, "AW_SCALE_AGENTS", 1000)
	burst := envInt(b, "AW_SCALE_BURST", 20000)
	single := envInt(b, "AW_SCALE_TURNS", 1000)
	scaleRounds = envInt(b, "AW_SCALE_ROUNDS", 2)
	idle := 3 * time.Second
	if v := os.Getenv("AW_SCALE_IDLE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("AW_SCALE_IDLE: %v", err)
		}
		idle = d
	}
	const burstAgents = scaleBurstAgents
	if n <= 2*burstAgents {
		b.Fatalf("AW_SCALE_AGENTS must be above %d", 2*burstAgents)
	}
	for range b.N {
		l := &laps{}
		l.mark("")
		bare := scaleBare(b, n, idle, l)
		prod := scaleWorker(b, n, burstAgents, burst, single, idle, l, &bare)
		printScale(n, burstAgents, burst, idle, bare, prod)
		fmt.Printf("phases: %s\n", strings.Join(l.list, ", "))
	}
}

// bareScale is what the bare JetStream anchor measured.
type bareScale struct {
	rssPerConsumer float64 // bytes
	goroutinesPer  float64
	createAll      time.Duration // creating and consuming n durables
	idleCPU        float64       // % of one core
	// the burst, over its rounds (on the worker's server)
	burstRates      []float64 // msgs/s
	burstCPU        time.Duration
	burstAcked      int64
	burstDuplicates int64
	burstShort      int
	burstQuiet      []time.Duration
}

// prodScale is what the worker measured.
type prodScale struct {
	startErr        string
	bound, working  int // agents with both consumers on the stream; agents whose probe message was handled
	firstDead       string
	errorsLogged    int64
	firstError      string
	ready, allBound time.Duration // from the Start call; 0: never within the wait
	rssPerAgent     float64
	rss1, rssN      uint64
	goroutines1     int
	goroutinesPer   float64
	idleCPU         float64
	// one-message turns of agent 0
	singleTime                 time.Duration
	singleCPU                  time.Duration
	singleHandled, singleTurns int64
	// singleOps: store round trips over the one-message turns (and the
	// quiet after them, singleOpsTime in all); idleOpsPerSec: the rate
	// while every agent sleeps (lease renewals, health probes).
	singleOps, idleOpsPerSec float64
	singleOpsTime            time.Duration
	singleOpsBy              []string // "op n" per turn
	singleHeap               float64  // HeapAlloc after − before, bytes
	// the burst, over its rounds
	burstRates               []float64
	burstFolds               []int64 // memory-compacted events per round
	burstQuiet               []time.Duration
	burstHandledRates        []float64 // to the last message-handled event
	burstAckedAll            []bool
	burstShort               int // rounds not every message of which was handled
	burstCPU                 time.Duration
	burstHandled, burstTurns int64
	burstHeap                float64 // over the first round
	burstHeapMsgs            int64
	// steadyHeap: over the last round, when it is not the first (the
	// agents, caches and buffers already warm).
	steadyHeap     float64
	steadyHeapMsgs int64
	stop           time.Duration
	waiting        int64 // waiting events: turns held because a dependency was reported down
	waitingProbe   int64 // the same, by the end of the probe
	late, lateOf   int   // agents given only the probe message: handled by the end of the run, of
}

// scaleBare measures the idle anchor on its own in-process nats-server:
// n idle bare consumers (memory, goroutines, idle CPU).
func scaleBare(b *testing.B, n int, idle time.Duration, l *laps) bareScale {
	var r bareScale
	ns, err := server.NewServer(&server.Options{ServerName: "bare", Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: b.TempDir(), NoSigs: true, NoLog: true})
	if err != nil {
		b.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		b.Fatal("bare nats-server not ready")
	}
	defer ns.Shutdown() // on failure
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close() // on failure
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BARE", Subjects: []string{"bare.>"}, MaxConsumers: n + 10})
	if err != nil {
		b.Fatal(err)
	}

	rss0, g0 := settledRSS(), runtime.NumGoroutine()
	t0 := time.Now()
	ccs := make([]jetstream.ConsumeContext, 0, n)
	for i := range n {
		c, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: fmt.Sprintf("idle%05d", i),
			FilterSubjects: []string{fmt.Sprintf("bare.idle.%05d", i)}, AckPolicy: jetstream.AckExplicitPolicy,
			MaxAckPending: 256, MaxDeliver: -1, DeliverPolicy: jetstream.DeliverAllPolicy})
		if err != nil {
			b.Fatalf("bare consumer %d: %v", i, err)
		}
		cc, err := c.Consume(func(m jetstream.Msg) { _ = m.Ack() }, jetstream.PullMaxMessages(256))
		if err != nil {
			b.Fatalf("bare consume %d: %v", i, err)
		}
		ccs = append(ccs, cc)
	}
	r.createAll = time.Since(t0)
	time.Sleep(time.Second) // the pull requests reach the server
	r.rssPerConsumer = float64(int64(settledRSS())-int64(rss0)) / float64(n)
	r.goroutinesPer = float64(runtime.NumGoroutine()-g0) / float64(n)
	r.idleCPU = idleCPU(idle)
	for _, cc := range ccs {
		cc.Stop()
	}
	l.mark("bare idle consumers")
	// Deleting the stream first spares the shutdown writing each
	// consumer's state.
	_ = js.DeleteStream(ctx, "BARE")
	nc.Close()
	ns.Shutdown()
	ns.WaitForShutdown()
	debug.FreeOSMemory()
	l.mark("bare server shutdown")
	return r
}

// scaleWorker measures the worker: a 1-agent worker for the baseline
// memory, then one with n agents.
func scaleWorker(b *testing.B, n, burstAgents, m, single int, idle time.Duration, l *laps, bare *bareScale) prodScale {
	var r prodScale
	ctx := context.Background()

	// Baseline: a worker with one agent, fully up, then stopped.
	{
		log := &errorCounter{}
		w, _, err := startScaleWorker(b, 1, log)
		if err != nil {
			b.Fatalf("start 1 agent: %v", err)
		}
		waitReady(w, time.Now(), 30*time.Second)
		waitBound(w, 1, 10*time.Second)
		time.Sleep(time.Second)
		r.rss1, r.goroutines1 = settledRSS(), runtime.NumGoroutine()
		w.Stop(ctx)
	}
	debug.FreeOSMemory()
	l.mark("1-agent worker")

	log := &errorCounter{}
	w, start, err := startScaleWorker(b, n, log)
	if err != nil { // reported in the table, not a failure
		r.startErr = err.Error()
		return r
	}
	stopped := false
	defer func() {
		if !stopped {
			w.Stop(ctx)
		}
	}()
	r.ready = waitReady(w, start, 60*time.Second)
	bound, at := waitBound(w, n, 30*time.Second)
	r.bound = bound
	if bound == n {
		r.allBound = at.Sub(start)
	}
	time.Sleep(time.Second)
	r.rssN = settledRSS()
	r.rssPerAgent = float64(int64(r.rssN)-int64(r.rss1)) / float64(n-1)
	r.goroutinesPer = float64(runtime.NumGoroutine()-r.goroutines1) / float64(n-1)
	ops0, idle0 := storeOps(b, w), time.Now()
	r.idleCPU = idleCPU(idle)
	r.idleOpsPerSec = (storeOps(b, w) - ops0) / time.Since(idle0).Seconds()
	l.mark("start, RSS, idle")

	// Every agent handled and turns counted from here on, by agent index.
	index := make(map[string]int, n)
	for i := range n {
		index[scaleAgent(i)] = i
	}
	handled := make([]atomic.Int64, n)
	var turns, handledAll atomic.Int64
	var waiting, folds, lastEvent atomic.Int64
	sub := w.Events().Subscribe(1, func(e events.Event) bool {
		lastEvent.Store(time.Now().UnixNano())
		switch e.Type {
		case events.Waiting:
			waiting.Add(1)
		case events.MemoryCompacted:
			folds.Add(1)
		}
		i, ok := index[e.Agent]
		if !ok {
			return false
		}
		switch e.Type {
		case events.MessageHandled:
			handled[i].Add(1)
			handledAll.Add(1)
		case events.TurnCompleted:
			turns.Add(1)
		}
		return false
	})
	defer sub.Close()
	nc, err := nats.Connect(w.NATS().ClientURL)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()

	// quiet waits until the worker published no event for quietFor and
	// the process's CPU is back near idle (nats-server's trailing work:
	// acks, deletes, consumer state), at most 20s.
	const quietFor = 500 * time.Millisecond
	quiet := func() time.Duration {
		t0 := time.Now()
		end := t0.Add(10 * time.Second)
		for time.Since(time.Unix(0, lastEvent.Load())) < quietFor && time.Now().Before(end) {
			time.Sleep(50 * time.Millisecond)
		}
		cpuQuiet(r.idleCPU, end)
		return time.Since(t0)
	}

	// Agents that work: one message to every agent.
	publishBurst(b, nc, n, n, func(i int) string { return "agents." + scaleAgent(i) + ".inbox" })
	waitCount(func() int64 {
		c := int64(0)
		for i := range handled {
			if handled[i].Load() > 0 {
				c++
			}
		}
		return c
	}, int64(n), 5*time.Second, 60*time.Second)
	for i := range handled {
		if handled[i].Load() > 0 {
			r.working++
		} else if r.firstDead == "" {
			r.firstDead = scaleAgent(i)
		}
	}
	r.errorsLogged, r.firstError = log.count.Load(), log.firstMsg()
	r.waitingProbe = waiting.Load()
	l.mark("probe")

	heapAt := func() float64 {
		time.Sleep(200 * time.Millisecond) // the last turn's writes settle
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return float64(ms.HeapAlloc)
	}
	// AW_SCALE_HEAP=DIR writes heap profiles around the first burst
	// (DIR/before.pprof, DIR/after.pprof): go tool pprof -base shows
	// what stays per handled message.
	heapProfile := func(name string) {
		dir := os.Getenv("AW_SCALE_HEAP")
		if dir == "" {
			return
		}
		f, err := os.Create(filepath.Join(dir, name+".pprof"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			b.Fatal(err)
		}
	}

	// One-message turns: agents burstAgents+1..2·burstAgents have inbox
	// cap 1, so each of their turns handles one message (mostly: one may
	// arrive while a turn drains).
	singleOf := func(i int) string { return "agents." + scaleAgent(burstAgents+1+i) + ".inbox" }
	quiet()
	h0, t0 := handledAll.Load(), turns.Load()
	heap0 := heapAt()
	ops0 = storeOps(b, w)
	byOp0 := storeOpsByOp(b, w)
	cpu0 := cpuTime()
	start0 := time.Now()
	publishBurst(b, nc, single, burstAgents, singleOf)
	waitCount(func() int64 { return handledAll.Load() - h0 }, int64(single), 10*time.Second, 120*time.Second)
	r.singleTime = time.Since(start0)
	quiet()
	r.singleCPU = cpuTime() - cpu0
	r.singleHandled = handledAll.Load() - h0
	r.singleTurns = turns.Load() - t0
	r.singleOps, r.singleOpsTime = storeOps(b, w)-ops0, time.Since(start0)
	for op, v := range storeOpsByOp(b, w) {
		if d := v - byOp0[op]; d > 0 {
			r.singleOpsBy = append(r.singleOpsBy, fmt.Sprintf("%s %.1f", op, d/float64(max(r.singleTurns, 1))))
		}
	}
	slices.Sort(r.singleOpsBy)
	r.singleHeap = heapAt() - heap0
	l.mark("one-message turns")

	// Burst: m messages round-robin to agents 1..burstAgents, alternating
	// with the bare anchor on the same server, scaleRounds times each. A
	// round ends when every message was acked (the input stream, interest
	// retention, is back to the count it had before the round: the
	// worker acks a message only after its turn is recorded); the CPU is
	// counted until then. Then the process is let go quiet (not counted)
	// so the next round runs alone. The heap before and after each worker
	// round gives the growth per handled message.
	bb := newBareBurst(b, nc, burstAgents)
	defer bb.stop()
	for round := range scaleRounds {
		quiet()
		hb, tb, fb := handledAll.Load(), turns.Load(), folds.Load()
		heap1 := heapAt()
		if round == 0 {
			heapProfile("before")
		}
		before := streamMsgs(w.NATS().JS, w.cfg.NATS.Stream)
		cpu1 := cpuTime()
		t1 := time.Now()
		publishBurst(b, nc, m, burstAgents, func(i int) string { return "agents." + scaleAgent(1+i) + ".inbox" })
		waitCount(func() int64 { return handledAll.Load() - hb }, int64(m), 30*time.Second, 120*time.Second)
		handledAt := time.Since(t1)
		r.burstAckedAll = append(r.burstAckedAll, waitStreamBack(w.NATS().JS, w.cfg.NATS.Stream, before, 60*time.Second))
		el := time.Since(t1)
		r.burstCPU += cpuTime() - cpu1
		got := handledAll.Load() - hb
		r.burstHandled += got
		r.burstTurns += turns.Load() - tb
		r.burstRates = append(r.burstRates, float64(got)/el.Seconds())
		r.burstHandledRates = append(r.burstHandledRates, float64(got)/handledAt.Seconds())
		r.burstFolds = append(r.burstFolds, folds.Load()-fb)
		if got < int64(m) {
			r.burstShort++
		}
		if round == 0 {
			r.burstHeap, r.burstHeapMsgs = heapAt()-heap1, got
			heapProfile("after")
		} else {
			r.steadyHeap, r.steadyHeapMsgs = heapAt()-heap1, got
		}
		r.burstQuiet = append(r.burstQuiet, quiet())
		bb.run(b, m, bare, r.idleCPU)
	}
	l.mark("burst")
	r.waiting = waiting.Load()
	// Agents given nothing after the probe: was their message handled
	// late, by the end of the run?
	for i := range handled {
		if i >= 1 && i <= 2*burstAgents {
			continue
		}
		r.lateOf++
		if handled[i].Load() > 0 {
			r.late++
		}
	}
	bb.stop()
	sub.Close()
	nc.Close()
	t2 := time.Now()
	if dir := os.Getenv("AW_SCALE_STOPDUMP"); dir != "" {
		// Where Worker.Stop spends its time: the goroutines 5s into it.
		dump := time.AfterFunc(5*time.Second, func() {
			if f, err := os.Create(filepath.Join(dir, "stop-goroutines.txt")); err == nil {
				_ = pprof.Lookup("goroutine").WriteTo(f, 1)
				f.Close()
			}
		})
		defer dump.Stop()
	}
	w.Stop(ctx)
	r.stop = time.Since(t2)
	stopped = true
	l.mark("stop")
	return r
}

func printScale(n, burstAgents, m int, idle time.Duration, bare bareScale, p prodScale) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "scale, %d agents, one process\tproduct\tanchor\tratio\tgoal\t\n", n)
	ratio := func(a, b float64) string {
		if b == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	kb := func(v float64) string { return fmt.Sprintf("%.1f KB", v/1024) }
	if p.startErr != "" {
		fmt.Fprintf(tw, "worker.Start with %d agents failed\t%s\t\t\t\t\n", n, p.startErr)
	}
	working := fmt.Sprintf("%d of %d", p.working, n)
	fmt.Fprintf(tw, "agents that work (message handled, 5s without progress ends the wait)\t%s\t%d\t%s\t%s\t\n", working, n, ratio(float64(p.working), float64(n)), "10,000, every one")
	fmt.Fprintf(tw, "- probe handled by the end of the run (agents given nothing else)\t%d of %d\t%d\t%s\t\t\n", p.late, p.lateOf, p.lateOf, ratio(float64(p.late), float64(p.lateOf)))
	fmt.Fprintf(tw, "- agents told to wait, a dependency reported down, during the probe\t%d\t0\t\t\t\n", p.waitingProbe)
	fmt.Fprintf(tw, "- agents with both consumers on the stream\t%d\t%d\t%s\t\t\n", p.bound, n, ratio(float64(p.bound), float64(n)))
	if p.firstDead != "" {
		fmt.Fprintf(tw, "- first agent not working\t%s\t\t\t\t\n", p.firstDead)
	}
	fmt.Fprintf(tw, "- ERROR lines logged by the worker\t%d\t0\t\t\t\n", p.errorsLogged)
	if p.firstError != "" {
		fmt.Fprintf(tw, "- first ERROR\t%s\t\t\t\t\n", p.firstError)
	}
	fmt.Fprintf(tw, "RSS per idle agent (vs bare consumer)\t%s\t%s\t%s\t≤ 60 KB, ≤ 1×\t\n", kb(p.rssPerAgent), kb(bare.rssPerConsumer), ratio(p.rssPerAgent, bare.rssPerConsumer))
	fmt.Fprintf(tw, "- RSS: worker 1 agent → %d agents\t%d → %d MB\t\t\t\t\n", n, p.rss1>>20, p.rssN>>20)
	fmt.Fprintf(tw, "- goroutines per idle agent\t%.1f\t%.1f\t%s\t\t\n", p.goroutinesPer, bare.goroutinesPer, ratio(p.goroutinesPer, bare.goroutinesPer))
	dur := func(d time.Duration) string {
		if d <= 0 {
			return "never"
		}
		return d.Round(time.Millisecond).String()
	}
	fmt.Fprintf(tw, "start → /readyz 200 (vs creating %d bare consumers)\t%s\t%s\t%s\t≤ 10 s at 10,000\t\n", n, dur(p.ready), dur(bare.createAll), ratio(float64(p.ready), float64(bare.createAll)))
	fmt.Fprintf(tw, "- start → every agent's consumers exist (checked from ready on)\t%s\t\t\t\t\n", dur(p.allBound))
	fmt.Fprintf(tw, "idle CPU, %v, %% of one core\t%.2f%%\t%.2f%%\t%s\t≤ 5%% at 10,000\t\n", idle, p.idleCPU, bare.idleCPU, ratio(p.idleCPU, bare.idleCPU))
	per := func(d time.Duration, k int64) time.Duration { return d / time.Duration(max(k, 1)) }
	bareMsg := per(bare.burstCPU, bare.burstAcked)
	if p.steadyHeapMsgs > 0 {
		fmt.Fprintf(tw, "heap growth per handled message (last burst, warm agents)\t%.3f KB\t0\t—\t≤ 0.05 KB\t\n", p.steadyHeap/float64(p.steadyHeapMsgs)/1024)
		fmt.Fprintf(tw, "- first burst (fresh agents: their caches and buffers grow once)\t%.3f KB\t0\t—\t\t\n", p.burstHeap/float64(max(p.burstHeapMsgs, 1))/1024)
	} else {
		fmt.Fprintf(tw, "heap growth per handled message (first burst; AW_SCALE_ROUNDS ≥ 2 adds a warm one)\t%.3f KB\t0\t—\t≤ 0.05 KB\t\n", p.burstHeap/float64(max(p.burstHeapMsgs, 1))/1024)
	}
	fmt.Fprintf(tw, "- per one-message turn\t%.3f KB\t0\t—\tflat\t\n", p.singleHeap/float64(max(p.singleTurns, 1))/1024)
	notAll := ""
	if p.burstShort > 0 {
		notAll += fmt.Sprintf(" (%d worker rounds not all handled)", p.burstShort)
	}
	if bare.burstShort > 0 {
		notAll += fmt.Sprintf(" (%d bare rounds not all acked)", bare.burstShort)
	}
	if bare.burstDuplicates > 0 {
		notAll += fmt.Sprintf(" (bare: %d redelivered)", bare.burstDuplicates)
	}
	for i := range min(len(p.burstRates), len(bare.burstRates)) {
		what := "fresh agents"
		if i > 0 {
			what = "the same agents again"
		}
		goal := ""
		if i == 0 {
			goal = "≥ 0.8"
		}
		acked := ""
		if !p.burstAckedAll[i] {
			acked = " (not all acked within 60s)"
		}
		fmt.Fprintf(tw, "burst %d (%s, %d memory folds): %d msgs to %d agents, msgs/s to the last ack%s%s\t%.0f\t%.0f\t%s\t%s\t\n", i+1, what, p.burstFolds[i], m, burstAgents, notAll, acked,
			p.burstRates[i], bare.burstRates[i], ratio(p.burstRates[i], bare.burstRates[i]), goal)
		notAll = ""
		fmt.Fprintf(tw, "- msgs/s to the last message-handled event\t%.0f\t\t\t\t\n", p.burstHandledRates[i])
		fmt.Fprintf(tw, "- then until the process is quiet (not counted, at most 10s)\t%v\t%v\t\t\t\n", p.burstQuiet[i].Round(10*time.Millisecond), bare.burstQuiet[i].Round(10*time.Millisecond))
	}
	one := per(p.singleCPU, p.singleTurns)
	fmt.Fprintf(tw, "CPU per one-message turn, %d agents (%d msgs, %d turns, %v) vs bare per msg\t%v\t%v\t%s\t≤ 0.4 ms\t\n", burstAgents, p.singleHandled, p.singleTurns, p.singleTime.Round(time.Millisecond),
		one.Round(time.Microsecond), bareMsg.Round(time.Microsecond), ratio(float64(one), float64(bareMsg)))
	turns := float64(max(p.singleTurns, 1))
	fmt.Fprintf(tw, "store round trips per one-message turn (less the idle rate, %.0f/s)\t%.1f\t\t\t≤ 2 synchronous\t\n", p.idleOpsPerSec,
		(p.singleOps-p.idleOpsPerSec*p.singleOpsTime.Seconds())/turns)
	fmt.Fprintf(tw, "- all the process's, sync and background (store_operations_total)\t%.1f\t\t\t\t\n", p.singleOps/turns)
	fmt.Fprintf(tw, "- by op: %s\t\t\t\t\t\n", strings.Join(p.singleOpsBy, ", "))
	perTurn := per(p.burstCPU, p.burstTurns)
	fmt.Fprintf(tw, "- CPU per burst turn (%d turns, %.0f msgs each)\t%v\t%v\t%s\t\t\n", p.burstTurns, float64(p.burstHandled)/float64(max(p.burstTurns, 1)),
		perTurn.Round(time.Microsecond), bareMsg.Round(time.Microsecond), ratio(float64(perTurn), float64(bareMsg)))
	perMsg := per(p.burstCPU, p.burstHandled)
	fmt.Fprintf(tw, "- CPU per handled message, burst\t%v\t%v\t%s\t\t\n", perMsg.Round(time.Microsecond), bareMsg.Round(time.Microsecond), ratio(float64(perMsg), float64(bareMsg)))
	fmt.Fprintf(tw, "agents told to wait, a dependency reported down, whole run (not a goal)\t%d\t0\t\t\t\n", p.waiting)
	fmt.Fprintf(tw, "Worker.Stop, %d agents (not a goal)\t%s\t\t\t\t\n", n, dur(p.stop))
	tw.Flush()
}

// scaleRounds is how many bursts the worker and the bare anchor each
// take, alternately (AW_SCALE_ROUNDS).
var scaleRounds = 2

// bareBurst is the burst's anchor: ack-only durable consumers on their
// own stream of the worker's nats-server, one per agent, each like an
// agent's wake consumer (MaxAckPending = inbox cap 256).
type bareBurst struct {
	ctx    context.Context
	nc     *nats.Conn
	js     jetstream.JetStream
	agents int
	ccs    []jetstream.ConsumeContext
	acked  atomic.Int64
	dup    atomic.Int64
	seen   sync.Map // stream sequence → struct{}: a redelivery is counted once
	want   atomic.Int64
	done   chan struct{}
}

func newBareBurst(b *testing.B, nc *nats.Conn, agents int) *bareBurst {
	js, _ := jetstream.New(nc)
	bb := &bareBurst{ctx: context.Background(), nc: nc, js: js, agents: agents}
	s, err := js.CreateStream(bb.ctx, jetstream.StreamConfig{Name: "SCALEBARE", Subjects: []string{"scalebare.>"},
		Retention: jetstream.InterestPolicy, MaxConsumers: agents + 10})
	if err != nil {
		b.Fatal(err)
	}
	for i := range agents {
		c, err := s.CreateOrUpdateConsumer(bb.ctx, jetstream.ConsumerConfig{Durable: fmt.Sprintf("burst%03d", i),
			FilterSubjects: []string{fmt.Sprintf("scalebare.%03d", i)}, AckPolicy: jetstream.AckExplicitPolicy,
			MaxAckPending: 256, MaxDeliver: -1, DeliverPolicy: jetstream.DeliverAllPolicy})
		if err != nil {
			b.Fatal(err)
		}
		cc, err := c.Consume(func(msg jetstream.Msg) {
			meta, _ := msg.Metadata()
			_ = msg.Ack()
			if meta != nil {
				if _, again := bb.seen.LoadOrStore(meta.Sequence.Stream, struct{}{}); again {
					bb.dup.Add(1)
					return
				}
			}
			if bb.acked.Add(1) == bb.want.Load() {
				close(bb.done)
			}
		}, jetstream.PullMaxMessages(256))
		if err != nil {
			b.Fatal(err)
		}
		bb.ccs = append(bb.ccs, cc)
	}
	return bb
}

// run publishes m messages round-robin to the bare consumers and waits
// until each was acked once.
func (bb *bareBurst) run(b *testing.B, m int, into *bareScale, idle float64) {
	bb.done = make(chan struct{})
	start := bb.acked.Load()
	bb.want.Store(start + int64(m))
	before := streamMsgs(bb.js, "SCALEBARE")
	cpu0 := cpuTime()
	t0 := time.Now()
	publishBurst(b, bb.nc, m, bb.agents, func(i int) string { return fmt.Sprintf("scalebare.%03d", i) })
	select {
	case <-bb.done:
	case <-time.After(60 * time.Second):
		into.burstShort++
	}
	waitStreamBack(bb.js, "SCALEBARE", before, 60*time.Second)
	el := time.Since(t0)
	into.burstCPU += cpuTime() - cpu0
	got := bb.acked.Load() - start
	into.burstAcked += got
	into.burstRates = append(into.burstRates, float64(got)/el.Seconds())
	into.burstDuplicates = bb.dup.Load()
	tq := time.Now()
	cpuQuiet(idle, tq.Add(10*time.Second))
	into.burstQuiet = append(into.burstQuiet, time.Since(tq))
	bb.seen.Clear()
}

func (bb *bareBurst) stop() {
	for _, cc := range bb.ccs {
		cc.Stop()
	}
	bb.ccs = nil
}

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

// scaleBurstAgents is how many agents the burst goes to, and how many
// take the one-message turns.
const scaleBurstAgents = 100

// scaleAgent names agent i.
func scaleAgent(i int) string { return fmt.Sprintf("s%05d", i) }

// startScaleWorker starts a worker with n agents on the scripted model;
// agents scaleBurstAgents+1..2·scaleBurstAgents have inbox cap 1. It
// returns the worker, when Start was called, and Start's error.
func startScaleWorker(b *testing.B, n int, log *errorCounter) (*Worker, time.Time, error) {
	var sb strings.Builder
	fmt.Fprintf(&sb, `data_dir: %s
shutdown_grace: 5s
api: {listen: "127.0.0.1:0"}
nats:
  listen: "-1"
  ack_wait: 30s
store: {url: "nats://"}
models:
  fake:
    provider: scripted
    script: [{text: "noted", usage: {input: 100, output: 10}}]
    loop: true
agents:
`, b.TempDir())
	for i := range n {
		inbox := ""
		if i > scaleBurstAgents && i <= 2*scaleBurstAgents {
			inbox = ", inbox: {cap: 1}"
		}
		fmt.Fprintf(&sb, "  - {name: %s, model: fake, tools: [schedule_next_turn, report_done], limits: {turns_per_hour: 100000000, turn_burst: 100000000}, turn: {max_per_wake: 100000000}, sleep: {min: 1s}%s}\n",
			scaleAgent(i), inbox)
	}
	p := filepath.Join(b.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(sb.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	cfg, err := config.Load(p)
	if err != nil {
		b.Fatalf("config: %v", err)
	}
	start := time.Now()
	w, err := Start(context.Background(), cfg, Options{
		Log: slog.New(log),
		Models: func(_ string, def config.Model) (model.LLM, error) {
			return scripted.New("fake", def)
		},
	})
	return w, start, err
}

// waitReady polls /readyz until it answers 200; it returns the time
// since start (when Start was called), or 0 on timeout.
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

// waitBound waits until the worker's input stream holds both consumers
// of each of n agents (2n+1 with the unknown-agents one) or the count
// stops growing for 3s; it returns the agents counted and when.
func waitBound(w *Worker, n int, timeout time.Duration) (int, time.Time) {
	ctx := context.Background()
	end := time.Now().Add(timeout)
	last, lastAt := -1, time.Now()
	for {
		cnt := 0
		if s, err := w.NATS().JS.Stream(ctx, w.cfg.NATS.Stream); err == nil {
			if info, err := s.Info(ctx); err == nil {
				cnt = info.State.Consumers
			}
		}
		agents := min(max(cnt-1, 0)/2, n)
		if agents == n {
			return n, time.Now()
		}
		if cnt != last {
			last, lastAt = cnt, time.Now()
		}
		if time.Now().After(end) || time.Since(lastAt) > 3*time.Second {
			return agents, time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
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

// publishBurst publishes m short messages, message i on subject(i %
// agents), flushing every 500 so the client's buffer stays bounded.
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

// cpuTime is the process's user + system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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

// waitStreamBack waits until the stream (interest retention: a message
// leaves it once acked) holds no more messages than before; false when
// timeout passed first.
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

// idleCPU is the process's CPU over d, as % of one core.
func idleCPU(d time.Duration) float64 {
	c0, t0 := cpuTime(), time.Now()
	time.Sleep(d)
	return 100 * float64(cpuTime()-c0) / float64(time.Since(t0))
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
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
		var agent, why string
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "agent":
				agent = a.Value.String()
			case "error":
				why = a.Value.String()
			}
			return true
		})
		if len(why) > 90 { // the cause is at the end
			why = "…" + why[len(why)-90:]
		}
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

// storeOps is the worker's agent_worker_store_operations_total, all ops
// and outcomes.
func storeOps(b *testing.B, w *Worker) float64 {
	return metricSums(b, w)["agent_worker_store_operations_total"]
}

// storeOpsByOp is agent_worker_store_operations_total by op.
func storeOpsByOp(b *testing.B, w *Worker) map[string]float64 {
	return metricLabelSums(b, w, "agent_worker_store_operations_total", "op")
}
