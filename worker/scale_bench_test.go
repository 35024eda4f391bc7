package worker

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/adk/model"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/models/scripted"
)

// BenchmarkScale prints, in one run and one process, every row of the
// scale goals table: the product's number, a bare anchor measured in the
// same process, their ratio, the goal and whether it is met. Run it with
// -benchtime 1x. Nothing here fails the benchmark: a goal missed reads
// "NO" in the table. Method, row by row:
//
//   - agents that work: a worker with N agents (scripted model, embedded
//     nats-server, store nats://, one replica, the default lease ttl 15s)
//     gets one message on each agent's inbox subject (core publish, no
//     Nats-Msg-Id); an agent works when its message was handled (a
//     message-handled event) before 30s pass without progress (at most
//     180s). Sub-rows: how long that took; how many worked when 5s first
//     passed without progress (a stall: the first version of this
//     benchmark stopped there); of the agents given no other message,
//     those whose probe was handled by the end of the run; "waiting"
//     events (agents told a dependency is down) during the probe and the
//     first one's reason; the first agent that did not work; the ERROR
//     lines the worker logged.
//   - RSS per idle agent: VmRSS (/proc/self/status) read after
//     debug.FreeOSMemory and one second of quiet, the slope from 10 to N
//     agents: (worker with N agents − worker with 10, started and stopped
//     just before) ÷ (N − 10). Whole process: the in-process nats-server
//     (its side of every stored key) counts, as in an embedded
//     deployment. Anchor (scale_idle_bench_test.go): N bare sleeping
//     agents — a goroutine parked on a timer and a lease key in NATS KV
//     renewed every 5s — on a nats-server of their own. Noise: a few MB
//     of RSS either way (fragmentation, the scavenger, other tests on the
//     machine), i.e. a few tenths of a KB per agent at 10,000.
//   - start to ready: worker.Start called → GET /readyz answers 200
//     (polled every 10ms). Anchor: taking the N bare agents' leases (N
//     KV creates, 16 in flight). Sub-row: → every agent owned (out of
//     standby), checked from ready on.
//   - idle CPU: user+system CPU time of the process (getrusage) over the
//     idle window (AW_SCALE_IDLE, 10s: keep it a multiple of the 5s lease
//     renewal period, whose rounds renew every lease at once) with every
//     agent asleep, as % of one core. Anchor: the N bare agents, their
//     lease renewals included. Sub-row: the store's round trips per second
//     meanwhile, by op.
//   - burst (scale_burst_bench_test.go): M messages published
//     round-robin (core publish, no Nats-Msg-Id, so that nothing is kept
//     for the duplicate window once handled; flushed every 500) on the
//     inbox subjects of 100 agents (inbox cap 256), from the first publish
//     until the input stream holds no more messages than before the round
//     (polled every 20ms): every message handled, its turn recorded with
//     the cursors, and purged. Anchor: on the same server, one ordered
//     consumer reading every message and a purger purging each subject
//     below what was read (bareBurst says why that is the bare
//     equivalent), timed the same way. The row is over every round: ratio
//     = product msgs/s ÷ bare msgs/s (= bare time ÷ product time, the
//     same M). Sub-rows per round: the rate to the last purge and to the
//     last message-handled event. Worker and anchor alternate, four times
//     each by default (AW_SCALE_ROUNDS), each round followed by waiting,
//     uncounted, until the process is quiet (no worker event for 500ms,
//     then 250ms using under max(5%, 2× idle) of a core; at most 10s; a
//     sub-row says how long) so that the next runs alone. The first round
//     finds fresh agents; the second, the same agents with the history of
//     the first (memory folds are counted).
//   - CPU per turn (scale_turns_bench_test.go): AW_SCALE_TURNS (1,000)
//     messages round-robin to 100 other agents whose inbox cap is 1, so
//     that each turn handles one message: the process's CPU time until it
//     is quiet again, less the idle rate over that time, ÷ their turns (a
//     sub-row gives it with the idle rate left in: at 10,000 agents the
//     lease renewals alone are several ms per turn). Sub-rows: the
//     bursts' CPU time (to the last purge) ÷ their turns (a turn handles
//     what waits, up to 256) and ÷ their messages. Anchor: the bare
//     bursts' CPU time ÷ messages.
//   - store round trips per turn: agent_worker_store_operations_total by
//     op over the one-message turns, counted on to whole lease renewal
//     periods, less, op by op, what the idle rate accounts for in that
//     time, ÷ turns; summed without update, the leases' op alone (package
//     lease is the only caller of Store.Update; its rounds slip under
//     load, so its idle rate does not take off cleanly: it is shown by op,
//     not summed), less one append per turn: the turn summary, which
//     turnlog's writer appends in the background (one per turn,
//     driver/turn.go); the sub-rows give the sum with it, by op, and all
//     ops without the idle rate taken off. Anchor: 1, the turn record (the
//     cursors are in it).
//   - heap growth per handled message: HeapAlloc (the least of three
//     readings, each after runtime.GC) before and after the last burst
//     round, ÷ messages handled; sub-rows: the same around each round
//     (fresh agents' histories and buffers grow once; their histories and
//     memories fill over the next rounds — at 200 messages an agent a
//     round, the second still grows by most of the first's growth, the
//     third on is flat: hence four rounds) and around the one-message
//     turns, ÷ turns (noisy: a few MB either way over 1,000 turns). The
//     anchor is 0. The in-process nats-server's heap (block caches, the
//     KV's per-key index) counts too.
//   - failover (scale_failover_bench_test.go): two more replicas on a
//     nats-server of their own, lease ttl 3s, ack_wait 30s; the owner of
//     an agent whose message is in a running turn is killed (its NATS
//     connection cut); kill → message-handled on the other. Anchor: the
//     ttl; goal: ttl + 1s.
//   - lease renewal (scale_renew_bench_test.go): during the probe and the
//     bursts, a probe writes a key every 50ms through the store the lease
//     renewals use (a connection of its own) and, for the anchor, through
//     the store the rest of the worker uses (what a renewal waited for
//     when it shared that connection): the p99 of each, ratio own ÷
//     shared; goal 1 s, a tenth of the margin before a lapse. Sub-rows:
//     the worker's own renewals in each phase, start and idle included,
//     from its agent_worker_lease_renew_seconds histogram (a renewal every
//     5 s: too few in a phase for a percentile, so the slowest bucket).
//   - Not goals, printed because they bound the run: how often agents
//     were told to wait because a dependency was reported down (whole
//     run), and how long Worker.Stop takes (AW_SCALE_STOPDUMP=DIR writes
//     the goroutines 5s into it, DIR/stop-goroutines.txt).
//
// Everything runs in this one process, the nats-servers too, so CPU and
// RSS include the server's share for product and anchor alike. The
// machine may be shared: the ratios within one run are what to read.
//
// Defaults: N = 10,000 agents, 20,000-message bursts, 2 rounds, 1,000
// one-message turns, a 10s idle window: three to five minutes on 2
// shared cores (the probe's wait is most of the spread). AW_SCALE_AGENTS,
// AW_SCALE_BURST, AW_SCALE_ROUNDS, AW_SCALE_TURNS and AW_SCALE_IDLE (a
// duration) change them; the "met?" of a row whose goal is stated at
// 10,000 agents says when N differs. Profiles: AW_SCALE_CPU=DIR writes
// CPU profiles of the start (DIR/start-cpu.pprof, Start → every agent
// owned), the idle window (idle-cpu.pprof), the one-message turns
// (turns-cpu.pprof) and each burst round (burst1-cpu.pprof, …);
// AW_SCALE_HEAP=DIR heap profiles of the idle N-agent worker (idle.pprof)
// and around the first burst (before.pprof, after.pprof: go tool pprof
// -base shows what stays per message).
func BenchmarkScale(b *testing.B) {
	o := scaleOptions{
		n:       envInt(b, "AW_SCALE_AGENTS", scaleGoalAgents),
		burst:   envInt(b, "AW_SCALE_BURST", 20000),
		turns:   envInt(b, "AW_SCALE_TURNS", 1000),
		rounds:  envInt(b, "AW_SCALE_ROUNDS", 4),
		idle:    envDuration(b, "AW_SCALE_IDLE", 10*time.Second),
		heapDir: os.Getenv("AW_SCALE_HEAP"),
		cpuDir:  os.Getenv("AW_SCALE_CPU"),
		stopDir: os.Getenv("AW_SCALE_STOPDUMP"),
	}
	if o.n <= 2*scaleBurstAgents {
		b.Fatalf("AW_SCALE_AGENTS must be above %d", 2*scaleBurstAgents)
	}
	for range b.N {
		l := &laps{}
		l.mark("")
		var s scaleRun
		s.bare = scaleBare(b, o, l)
		s.prod = scaleWorker(b, o, l, &s.bare)
		s.fail = scaleFailover(b, l)
		printScale(o, s)
		fmt.Printf("phases: %s\n", strings.Join(l.list, ", "))
	}
}

// scaleGoalAgents is the number of agents the goals are stated at.
const scaleGoalAgents = 10000

// scaleBurstAgents is how many agents the burst goes to, and how many
// take the one-message turns.
const scaleBurstAgents = 100

// scaleOptions is what the AW_SCALE_* knobs set.
type scaleOptions struct {
	n, burst, turns, rounds  int
	idle                     time.Duration
	heapDir, cpuDir, stopDir string
}

// scaleRun is everything one run measured.
type scaleRun struct {
	bare bareScale
	prod prodScale
	fail failoverScale
}

// bareScale is what the bare anchors measured.
type bareScale struct {
	rssPerAgent, goroutinesPer float64 // per bare sleeping agent
	createAll                  time.Duration
	idleCPU                    float64 // % of one core
	renewalsPerSec             float64
	bursts                     []burstRound
	burstCPU                   time.Duration
	burstRead                  int64
}

// prodScale is what the worker measured.
type prodScale struct {
	startErr     string
	working      int // agents whose probe message was handled
	probeTime    time.Duration
	probeCPU     float64       // the process's CPU meanwhile, % of one core
	beforeStall  int           // agents working when 5s first passed without progress; -1: never
	stallAt      time.Duration // when that gap began, from the first publish
	firstDead    string
	errorsLogged int64
	firstError   string
	waitingProbe int64 // waiting events by the end of the probe
	waitingWhy   string
	waiting      int64 // waiting events, whole run
	late, lateOf int   // agents given only the probe message: handled by the end of the run, of
	ready        time.Duration
	allOwned     time.Duration // from the Start call; 0: never within the wait
	allRestored  time.Duration // from the Start call; 0: never within the wait
	owned        int
	rss10, rssN  uint64
	rssPerAgent  float64
	goroutines10 int
	goroutinesN  int
	idleCPU      float64
	idleOps      map[string]float64 // store round trips per second while idle, by op
	// the one-message turns
	singleTime, singleCPU      time.Duration
	singleCPUTime              time.Duration // the CPU's window: first publish → quiet
	singleHandled, singleTurns int64
	singleOps                  map[string]float64 // store round trips over them (until quiet), by op
	singleOpsTime              time.Duration
	singleHeap                 float64 // HeapAlloc after − before, bytes
	// the burst, over its rounds
	bursts                   []burstRound
	burstCPU                 time.Duration
	burstHandled, burstTurns int64
	burstHeap                float64 // over the first round
	burstHeapMsgs            int64
	// steadyHeap: over the last round, when it is not the first (the
	// agents, caches and buffers already warm).
	steadyHeap     float64
	steadyHeapMsgs int64
	stop           time.Duration
	// renewals of the lease record by phase (scale_renew_bench_test.go)
	renewStart, renewIdle, renewProbe, renewBursts renewPhase
}

// rssSlope is the RSS per idle agent, from 10 to N agents.
func (p prodScale) rssSlope(n int) float64 {
	return float64(int64(p.rssN)-int64(p.rss10)) / float64(n-scaleBaseAgents)
}

// scaleBaseAgents is the agents of the baseline worker the RSS slope
// starts from.
const scaleBaseAgents = 10

// scaleWorker measures the worker: a 10-agent worker for the baseline
// memory, then one with o.n agents.
func scaleWorker(b *testing.B, o scaleOptions, l *laps, bare *bareScale) prodScale {
	var r prodScale
	{
		w, start, err := startScaleWorker(b, scaleBaseAgents, &errorCounter{})
		if err != nil {
			b.Fatalf("start %d agents: %v", scaleBaseAgents, err)
		}
		waitReady(w, start, 30*time.Second)
		waitOwned(w, 10*time.Second)
		time.Sleep(time.Second)
		r.rss10, r.goroutines10 = settledRSS(), runtime.NumGoroutine()
		w.Stop(context.Background())
	}
	debug.FreeOSMemory()
	l.mark(fmt.Sprintf("%d-agent worker", scaleBaseAgents))

	log := &errorCounter{}
	stopProfile := profileCPU(b, o.cpuDir, "start-cpu.pprof")
	w, start, err := startScaleWorker(b, o.n, log)
	if err != nil { // reported in the table, not a failure
		stopProfile()
		r.startErr = err.Error()
		return r
	}
	stopped := false
	defer func() {
		if !stopped {
			w.Stop(context.Background())
		}
	}()
	r.ready = waitReady(w, start, 60*time.Second)
	owned, at := waitOwned(w, 60*time.Second)
	if r.owned = owned; owned == o.n {
		r.allOwned = at.Sub(start)
	}
	if restored, at := waitRestored(w, 60*time.Second); restored == o.n {
		r.allRestored = at.Sub(start)
	}
	stopProfile()
	// No probe: most of a start is inside Start, before the stores are
	// there to probe; the worker's own renewals are measured.
	ren := readRenewals(b, w)
	r.renewStart.worker = ren.since(nil)
	time.Sleep(time.Second)
	r.rssN, r.goroutinesN = settledRSS(), runtime.NumGoroutine()
	r.rssPerAgent = r.rssSlope(o.n)
	writeProfile(b, o.heapDir, "idle.pprof", "heap", 0)
	ops0, idle0 := storeOpsByOp(b, w), time.Now()
	stopProfile = profileCPU(b, o.cpuDir, "idle-cpu.pprof")
	ren = readRenewals(b, w) // no probe: its writes would count as the idle rate
	r.idleCPU = idleCPU(o.idle)
	stopProfile()
	r.renewIdle.worker = readRenewals(b, w).since(ren)
	secs := time.Since(idle0).Seconds()
	r.idleOps = opsSince(b, w, ops0)
	for op := range r.idleOps {
		r.idleOps[op] /= secs
	}
	l.mark("start, RSS, idle")

	c := countEvents(w, o.n)
	defer c.sub.Close()
	nc, err := nats.Connect(w.NATS().ClientURL)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	ren, probe := readRenewals(b, w), probeRenewals(w)
	scaleProbe(b, o, nc, c, log, &r)
	r.renewProbe.own, r.renewProbe.shared = probe.end()
	r.renewProbe.worker = readRenewals(b, w).since(ren)
	l.mark("probe")
	scaleTurns(b, o, w, nc, c, &r)
	l.mark("one-message turns")
	ren, probe = readRenewals(b, w), probeRenewals(w)
	scaleBursts(b, o, w, nc, c, &r, bare)
	r.renewBursts.own, r.renewBursts.shared = probe.end()
	r.renewBursts.worker = readRenewals(b, w).since(ren)
	l.mark("burst")
	r.waiting = c.waiting.Load()
	// Agents given nothing after the probe: was their message handled
	// late, by the end of the run?
	for i := range c.perAgent {
		if i >= 1 && i <= 2*scaleBurstAgents {
			continue
		}
		r.lateOf++
		if c.perAgent[i].Load() > 0 {
			r.late++
		}
	}
	c.sub.Close()
	nc.Close()
	t2 := time.Now()
	if o.stopDir != "" {
		// Where Worker.Stop spends its time: the goroutines 5s into it.
		dump := time.AfterFunc(5*time.Second, func() { writeProfile(b, o.stopDir, "stop-goroutines.txt", "goroutine", 1) })
		defer dump.Stop()
	}
	w.Stop(context.Background())
	r.stop = time.Since(t2)
	stopped = true
	debug.FreeOSMemory()
	l.mark("stop")
	return r
}

// scaleProbe sends one message to every agent and counts the agents that
// handled theirs.
func scaleProbe(b *testing.B, o scaleOptions, nc *nats.Conn, c *scaleCounts, log *errorCounter, r *prodScale) {
	t0, cpu0 := time.Now(), cpuTime()
	publishBurst(b, nc, o.n, o.n, func(i int) string { return "agents." + scaleAgent(i) + ".inbox" })
	working := func() int64 {
		n := int64(0)
		for i := range c.perAgent {
			if c.perAgent[i].Load() > 0 {
				n++
			}
		}
		return n
	}
	// One wait, for every agent's message or until 30s pass without
	// progress (at most 180s), noting where 5s first passed without any:
	// a stall, not a dead agent.
	const stall, shortStall, within = 30 * time.Second, 5 * time.Second, 180 * time.Second
	r.beforeStall = -1
	last, lastAt := int64(-1), time.Now()
	for {
		n, now := working(), time.Now()
		if n >= int64(o.n) || now.Sub(t0) > within {
			break
		}
		if n != last {
			last, lastAt = n, now
		} else if gap := now.Sub(lastAt); gap > stall {
			break
		} else if gap > shortStall && r.beforeStall < 0 {
			r.beforeStall, r.stallAt = int(n), lastAt.Sub(t0)
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.probeTime = time.Since(t0)
	r.probeCPU = 100 * float64(cpuTime()-cpu0) / float64(r.probeTime)
	for i := range c.perAgent {
		if c.perAgent[i].Load() > 0 {
			r.working++
		} else if r.firstDead == "" {
			r.firstDead = scaleAgent(i)
		}
	}
	r.errorsLogged, r.firstError = log.count.Load(), log.firstMsg()
	r.waitingProbe, r.waitingWhy = c.waiting.Load(), c.firstWaiting()
}

// scaleAgent names agent i.
func scaleAgent(i int) string { return fmt.Sprintf("s%05d", i) }

// startScaleWorker starts a worker with n agents on the scripted model;
// the one-message turns' agents have inbox cap 1. It returns the worker,
// when Start was called, and Start's error.
func startScaleWorker(b *testing.B, n int, log *errorCounter) (*Worker, time.Time, error) {
	var sb strings.Builder
	fmt.Fprintf(&sb, `data_dir: %s
shutdown_grace: 5s
api: {listen: "127.0.0.1:0"}
nats: {listen: "-1"}
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
	cfg := scaleConfig(b, sb.String())
	start := time.Now()
	w, err := startScripted(cfg, slog.New(log))
	return w, start, err
}

// scaleConfig loads the configuration yaml.
func scaleConfig(b *testing.B, yaml string) *config.Config {
	p := filepath.Join(b.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		b.Fatal(err)
	}
	cfg, err := config.Load(p)
	if err != nil {
		b.Fatalf("config: %v\n%s", err, yaml)
	}
	return cfg
}

// startScripted starts a worker whose models are all scripted.
func startScripted(cfg *config.Config, log *slog.Logger) (*Worker, error) {
	return Start(context.Background(), cfg, Options{Log: log,
		Models: func(_ string, def config.Model) (model.LLM, error) { return scripted.New("fake", def) }})
}
