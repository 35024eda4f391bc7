package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/adk/agent"
	"google.golang.org/adk/agent/llmagent"
	"google.golang.org/adk/model"
	"google.golang.org/adk/runner"
	"google.golang.org/adk/session"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/models/scripted"
	"github.com/agent-worker/agent-worker/scheduler"
	"github.com/agent-worker/agent-worker/store/memstore"
	"github.com/agent-worker/agent-worker/tools"
)

var benchScript = []config.ScriptStep{
	{Call: &config.Call{Name: "schedule_next_turn", Args: map[string]any{"wake_in_seconds": 300}}, Usage: config.Usage{Input: 1200, Output: 20}},
	{Text: "Triaged: cpu high on web-3 is the deploy; no action needed.", Usage: config.Usage{Input: 1300, Output: 30}},
}

const benchInstruction = "You triage alerts for the payments cluster. Decide whether each alert needs a human, summarise, and schedule your next check."

// benchAgent is one driver agent on a fake clock (timers never fire by
// themselves) whose turns the benchmark drives one at a time.
type benchAgent struct {
	d   *Driver
	a   *Agent
	sub *events.Subscription

	mu       sync.Mutex
	requests []*model.LLMRequest // each turn's first model request
	calls    int
}

// newBenchAgent returns an agent with the given history window. record,
// when set, says which turns (from 1) to keep the prompt of.
func newBenchAgent(tb testing.TB, history int, record func(turn int) bool) *benchAgent {
	return newBenchAgentWith(tb, history, record, nil)
}

// newBenchAgentWith is newBenchAgent whose turns tracer traces (nil: not
// traced).
func newBenchAgentWith(tb testing.TB, history int, record func(turn int) bool, tracer trace.Tracer) *benchAgent {
	ba := &benchAgent{}
	m, err := scripted.New("bench", config.Model{Script: benchScript, Loop: true}, scripted.WithHook(
		func(_ context.Context, req *model.LLMRequest, _ int) error {
			ba.mu.Lock()
			defer ba.mu.Unlock()
			ba.calls++
			// Keep the first call of the turns the table reports; sized
			// after the run, so sizing costs no turn time, and only those,
			// so the benchmark does not grow the heap the GC must scan.
			if turn := (ba.calls + 1) / 2; ba.calls%2 == 1 && record != nil && record(turn) {
				ba.requests = append(ba.requests, req)
			}
			return nil
		}))
	if err != nil {
		tb.Fatal(err)
	}
	// The real clock: event times measure turns. The 5-minute wakes the
	// script asks for never come due during a benchmark.
	c := clock.Real()
	bus := events.NewBus(0, nil)
	ba.sub = bus.Subscribe(64, func(e events.Event) bool {
		return e.Type == events.TurnCompleted || e.Type == events.TurnFailed
	})
	ba.d, err = New(Deps{Clock: c, Store: memstore.New(c), Events: bus, Tracer: tracer}, []Spec{{
		Name: "bench", Instruction: benchInstruction, Model: m,
		Tools: []string{tools.ScheduleNextTurn, tools.ReportDone},
		Sleep: tools.Sleep{Max: 24 * time.Hour}, HistoryTurns: history,
	}})
	if err != nil {
		tb.Fatal(err)
	}
	ba.a, _ = ba.d.Agent("bench")
	if err := ba.d.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return ba
}

// turn sends one alert, waits for the turn it causes and returns the
// time from Send to the turn-completed event (stamped by the agent's real
// clock when the turn was recorded), so the benchmark's own wake-up to
// read the event is not counted.
func (ba *benchAgent) turn(tb testing.TB, i int) time.Duration {
	t0 := time.Now()
	ba.a.Send(inbox.Message{Kind: inbox.Wake, Source: "nats:alerts.payments.web", From: "alertmanager",
		Text: fmt.Sprintf("FIRING cpu high on web-%d: 97%% for 10m", i)})
	e := <-ba.sub.C
	if e.Type != events.TurnCompleted {
		tb.Fatalf("turn %d: %v", i, e.Data)
	}
	return e.Time.Sub(t0)
}

func (ba *benchAgent) close() { ba.d.Shutdown(context.Background()) }

// requestBytes is the size of what a provider would be sent: system
// instruction, contents and tool declarations.
func requestBytes(req *model.LLMRequest) int {
	b, _ := json.Marshal(req.Contents)
	n := len(b)
	if req.Config != nil {
		c, _ := json.Marshal(req.Config)
		n += len(c)
	}
	return n
}

// bareRunner is ADK with nothing of ours around it: same model, tools and
// instruction, session.InMemoryService. To send the model the same context
// as a driver agent with a one-turn window, each turn runs in a new session
// seeded with the previous turn's events.
type bareRunner struct {
	r    *runner.Runner
	svc  session.Service
	n    int
	prev []*session.Event
}

func newBareRunner(tb testing.TB) *bareRunner {
	m, err := scripted.New("bench", config.Model{Script: benchScript, Loop: true})
	if err != nil {
		tb.Fatal(err)
	}
	ts, err := tools.Build([]string{tools.ScheduleNextTurn, tools.ReportDone}, tools.Env{Host: nopHost{}, Sleep: tools.Sleep{Max: 24 * time.Hour}})
	if err != nil {
		tb.Fatal(err)
	}
	a, err := llmagent.New(llmagent.Config{Name: "bench", Model: m, Instruction: benchInstruction, Tools: ts})
	if err != nil {
		tb.Fatal(err)
	}
	svc := session.InMemoryService()
	r, err := runner.New(runner.Config{AppName: AppName, Agent: a, SessionService: svc})
	if err != nil {
		tb.Fatal(err)
	}
	return &bareRunner{r: r, svc: svc}
}

func (br *bareRunner) turn(tb testing.TB, i int) {
	ctx := context.Background()
	br.n++
	sid := fmt.Sprintf("s%d", br.n)
	created, err := br.svc.Create(ctx, &session.CreateRequest{AppName: AppName, UserID: "bench", SessionID: sid})
	if err != nil {
		tb.Fatal(err)
	}
	for _, ev := range br.prev {
		if err := br.svc.AppendEvent(ctx, created.Session, ev); err != nil {
			tb.Fatal(err)
		}
	}
	msg := genai.NewContentFromText(fmt.Sprintf("FIRING cpu high on web-%d: 97%% for 10m", i), genai.RoleUser)
	user := session.NewEvent("")
	user.Author = "user"
	user.Content = msg
	br.prev = append(br.prev[:0], user)
	for ev, err := range br.r.Run(ctx, "bench", sid, msg, agent.RunConfig{}) {
		if err != nil {
			tb.Fatal(err)
		}
		br.prev = append(br.prev, ev)
	}
}

type nopHost struct{}

func (nopHost) ActionID(string) string            { return "" }
func (nopHost) Now() time.Time                    { return epoch }
func (nopHost) RequestWake(time.Time, string)     {}
func (nopHost) ReportDone(string, map[string]any) {}

// The benchmarks here run a fixed workload per iteration and print a
// table; run them with -benchtime 1x (make bench does).
//
// BenchmarkDriverVsBareADK times one driver turn, from Send to the turn
// recorded (wake, hand-off to the agent's loop, gate, drain, frame, ADK
// run, history commit, events), against a bare ADK runner.Run on the same
// scripted model with the same context, alternating so both see the same
// machine, and reports the ratio (goal: driver ≤ 1.10× bare).
func BenchmarkDriverVsBareADK(b *testing.B) {
	const window, turns = 1, 3000
	for range b.N {
		ba := newBenchAgent(b, window, nil)
		br := newBareRunner(b)
		for i := range 20 { // warm both up
			ba.turn(b, i)
			br.turn(b, i)
		}
		var dDriver, dBare time.Duration
		for i := range turns {
			dDriver += ba.turn(b, i)
			t0 := time.Now()
			br.turn(b, i)
			dBare += time.Since(t0)
		}
		ba.close()
		ratio := float64(dDriver) / float64(dBare)
		fmt.Printf("driver turn %v, bare ADK runner.Run %v over %d turns: driver/bare %.2f (goal ≤ 1.10)\n",
			(dDriver / turns).Round(time.Microsecond), (dBare / turns).Round(time.Microsecond), turns, ratio)
		b.ReportMetric(float64(dDriver.Nanoseconds())/turns, "driver-ns/turn")
		b.ReportMetric(float64(dBare.Nanoseconds())/turns, "bare-ns/turn")
		b.ReportMetric(ratio, "driver/bare")
	}
}

// BenchmarkThousandWakes runs 1,000 sequential wakes of one agent with the
// default history window and prints per-turn time and prompt size for the
// first 10, the first 10 after the window filled, and the last 10.
func BenchmarkThousandWakes(b *testing.B) {
	// Each benchmark iteration runs the 1,000 wakes runs times over fresh
	// agents; a turn's time is its median across runs, so one slow moment
	// of a shared machine does not decide a row.
	const wakes, window, runs = 1000, 10, 5
	for range b.N {
		var ba *benchAgent
		perRun := make([][]time.Duration, wakes)
		for range runs {
			ba = newBenchAgent(b, window, func(turn int) bool { return turn <= 20 || turn > wakes-10 })
			for i := range wakes {
				perRun[i] = append(perRun[i], ba.turn(b, i))
			}
			ba.close()
		}
		durs := make([]time.Duration, wakes)
		for i := range wakes {
			durs[i] = median(perRun[i])
		}
		ba.mu.Lock()
		sizes := make([]int, wakes) // only the reported turns are filled
		for i, r := range ba.requests {
			turn := i
			if i >= 20 {
				turn = wakes - 30 + i
			}
			sizes[turn] = requestBytes(r)
		}
		ba.mu.Unlock()
		rows := []struct {
			name     string
			from, to int
		}{{"turns 1-10", 0, 10}, {"turns 11-20 (window full)", 10, 20}, {"turns 991-1000", wakes - 10, wakes}}
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "1,000 wakes ×%d runs, history_turns=%d\tmedian turn time\tmean prompt bytes\t\n", runs, window)
		var mt [3]time.Duration
		var ms [3]float64
		for r, row := range rows {
			// The median: one GC pause in ten turns must not decide it.
			mt[r] = median(durs[row.from:row.to])
			for i := row.from; i < row.to; i++ {
				ms[r] += float64(sizes[i]) / 10
			}
			fmt.Fprintf(tw, "%s\t%v\t%.0f\t\n", row.name, mt[r].Round(time.Microsecond), ms[r])
		}
		fmt.Fprintf(tw, "last/first (1-10)\t%.2f\t%.2f\t\n", float64(mt[2])/float64(mt[0]), ms[2]/ms[0])
		fmt.Fprintf(tw, "last/window-full (11-20)\t%.2f\t%.2f\t\n", float64(mt[2])/float64(mt[1]), ms[2]/ms[1])
		tw.Flush()
		b.ReportMetric(ms[2]/ms[1], "prompt-last/window-full")
		b.ReportMetric(float64(mt[2])/float64(mt[1]), "time-last/window-full")
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return (s[(len(s)-1)/2] + s[len(s)/2]) / 2
}

// BenchmarkScheduleFireLag runs 1,000 schedules across 100 agents on the
// real clock — each agent has ten schedules, one per second of a ten-second
// cycle, so every second 100 agents fire together — and prints the lag
// from each tick's scheduled time to its turn starting (p50, p99).
func BenchmarkScheduleFireLag(b *testing.B) {
	const agents, perAgent = 100, 10
	for range b.N {
		bus := events.NewBus(0, nil)
		sub := bus.Subscribe(4*agents*perAgent, func(e events.Event) bool { return e.Type == events.TurnStarted })
		st := memstore.New(nil)
		var specs []Spec
		for i := range agents {
			m, err := scripted.New("bench", config.Model{Script: []config.ScriptStep{{Text: "checked", Usage: config.Usage{Input: 100, Output: 5}}}, Loop: true})
			if err != nil {
				b.Fatal(err)
			}
			sp := Spec{Name: fmt.Sprintf("agent-%03d", i), Model: m, HistoryTurns: 1}
			for j := range perAgent {
				sp.Schedules = append(sp.Schedules, scheduler.Schedule{
					Name: fmt.Sprintf("s%d", j), Cron: fmt.Sprintf("%d/10 * * * * *", j), Enabled: true, Overlap: scheduler.OverlapQueue,
				})
			}
			specs = append(specs, sp)
		}
		d, err := New(Deps{Store: st, Events: bus}, specs)
		if err != nil {
			b.Fatal(err)
		}
		if err := d.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		lags := make([]time.Duration, 0, agents*perAgent)
		timeout := time.After(30 * time.Second)
	collect:
		for len(lags) < agents*perAgent {
			select {
			case e := <-sub.C:
				if at, ok := e.Data["cause_at"].(time.Time); ok {
					lags = append(lags, e.Time.Sub(at))
				}
			case <-timeout:
				break collect
			}
		}
		d.Shutdown(context.Background())
		if len(lags) < agents*perAgent {
			b.Fatalf("only %d of %d ticks started a turn within 30s", len(lags), agents*perAgent)
		}
		fmt.Printf("schedule fire lag, %d schedules × 1 tick across %d agents (scheduled time → turn start): p50 %v, p99 %v, max %v\n",
			len(lags), agents, median(lags).Round(time.Microsecond), pct(lags, .99).Round(time.Microsecond), pct(lags, 1).Round(time.Microsecond))
		b.ReportMetric(float64(median(lags).Microseconds()), "p50-µs")
		b.ReportMetric(float64(pct(lags, .99).Microseconds()), "p99-µs")
	}
}

func pct(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1))]
}
