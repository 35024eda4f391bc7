package guard_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/adk/model"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/models/scripted"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memstore"
)

const deadline = 20 * time.Second

// Every scripted call below reports 100k input tokens: at $10 per million
// input tokens, each call costs exactly $1.
var prices = map[string]config.Price{"priced-1": {InputPerMTok: 10}}

func dollarCall(tool string) config.ScriptStep {
	return config.ScriptStep{Call: &config.Call{Name: tool, Args: map[string]any{"summary": "step"}}, Usage: config.Usage{Input: 100_000}}
}

func dollarText(s string) config.ScriptStep {
	return config.ScriptStep{Text: s, Usage: config.Usage{Input: 100_000}}
}

type world struct {
	t      *testing.T
	clock  *clock.Fake
	store  store.Store
	bus    *events.Bus
	sub    *events.Subscription
	guard  *guard.Guard
	driver *driver.Driver
	models map[string]*scripted.Model
	logs   *syncLog
}

type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncLog) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncLog) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

type agentDef struct {
	name   string
	model  string // pricing name
	script []config.ScriptStep
	limits guard.Limits
}

func build(t *testing.T, c *clock.Fake, st store.Store, opts guard.Options, agents ...agentDef) *world {
	t.Helper()
	w := &world{t: t, clock: c, store: st, bus: events.NewBus(0, nil), models: map[string]*scripted.Model{}, logs: &syncLog{}}
	w.sub = w.bus.Subscribe(10000, nil)
	opts.Store, opts.Clock, opts.Events = st, c, w.bus
	opts.Log = newLogger(w.logs)
	opts.Prices = guard.NewPrices(prices)
	w.guard = guard.New(opts)
	var specs []driver.Spec
	for _, a := range agents {
		m, err := scripted.New(a.model, config.Model{Model: a.model, Script: a.script, Loop: true})
		if err != nil {
			t.Fatal(err)
		}
		w.models[a.name] = m
		w.guard.AddAgent(a.name, a.model, a.limits)
		specs = append(specs, driver.Spec{Name: a.name, Model: m, Tools: []string{"report_done"}, HistoryTurns: 5})
	}
	var err error
	w.driver, err = driver.New(driver.Deps{Clock: c, Store: st, Events: w.bus, Log: opts.Log, Guards: []hook.Guard{w.guard}}, specs)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.driver.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.driver.Shutdown(context.Background()) })
	return w
}

func (w *world) agent(name string) *driver.Agent {
	a, err := w.driver.Agent(name)
	if err != nil {
		w.t.Fatal(err)
	}
	return a
}

func (w *world) send(name, text string) {
	w.agent(name).Send(inbox.Message{Kind: inbox.Wake, Text: text, Source: "test"})
}

func (w *world) waitEvent(typ string) events.Event {
	w.t.Helper()
	return wait.Event(w.t, deadline, w.sub, "a "+typ+" event", wait.OfType(typ))
}

var epoch = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

func TestTurnCeilingStopsRightAfterTheCrossingCall(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(epoch)
	w := build(t, c, memstore.New(c), guard.Options{}, agentDef{
		name: "a", model: "priced-1", script: []config.ScriptStep{dollarCall("report_done")}, limits: guard.Limits{TurnUSD: 2.5},
	})
	w.send("a", "loop forever")
	e := w.waitEvent(guard.EventTripped)
	if e.Data["guardrail"] != guard.Turn {
		t.Fatalf("tripped %v", e.Data)
	}
	f := w.waitEvent(events.TurnFailed)
	if f.Data["outcome"] != driver.OutcomeHalted {
		t.Fatalf("turn outcome %v", f.Data)
	}
	if n := w.models["a"].Calls(); n != 3 {
		t.Fatalf("%d model calls, want 3: the third ($3 > $2.50) must be the last", n)
	}
	wait.For(t, "halted", func() bool { return w.agent("a").State() == driver.Halted })
	if lt := w.agent("a").Status().LastTurn; lt == nil || lt.ModelCalls != 3 || lt.TokensIn != 300_000 {
		t.Fatalf("last turn summary %+v: want the 3 charged calls (300k input tokens), the stopping one included", lt)
	}
}

func TestSessionCeilingSurvivesRestartAndResetsRaiseNeverRewrite(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(epoch)
	st := memstore.New(c)
	def := agentDef{name: "a", model: "priced-1", script: []config.ScriptStep{dollarText("done")}, limits: guard.Limits{SessionUSD: 2}}
	w := build(t, c, st, guard.Options{}, def)
	w.send("a", "one")
	w.waitEvent(events.TurnCompleted)
	w.send("a", "two")
	if e := w.waitEvent(guard.EventTripped); e.Data["guardrail"] != guard.Session {
		t.Fatalf("tripped %v", e.Data)
	}
	w.driver.Shutdown(context.Background())

	w2 := build(t, c, st, guard.Options{}, def) // a restarted worker
	wait.For(t, "still halted after restart", func() bool { return w2.agent("a").State() == driver.Halted })
	w2.send("a", "while halted")
	if n := w2.models["a"].Calls(); n != 0 {
		t.Fatalf("a halted agent called its model %d times", n)
	}

	_, err := w2.guard.Reset("a", guard.Session, 0)
	var refused *guard.RefusedError
	if !errors.As(err, &refused) || refused.Spent != 2 || refused.Ceiling != 2 {
		t.Fatalf("reset without budget: %v", err)
	}
	if !strings.Contains(err.Error(), "spent $2 against a ceiling of $2 would trip again at once; add any budget (e.g. $0.01)") {
		t.Fatalf("refusal lacks the numbers: %v", err)
	}
	res, err := w2.guard.Reset("a", guard.Session, 5)
	if err != nil || !res.Cleared || res.CeilingUSD != 7 || res.SpentUSD != 2 {
		t.Fatalf("reset with budget: %+v, %v", res, err)
	}
	w2.waitEvent(events.TurnCompleted) // the message queued while halted runs
	st2, _ := w2.guard.Status("a")
	if st2.Session.SpentUSD != 3 || st2.Session.CeilingUSD != 7 {
		t.Fatalf("status after reset %+v: spend must never be lowered", st2.Session)
	}
}

func TestDailyCeilingReopensAtTheNextDayInItsTimezone(t *testing.T) {
	t.Parallel()
	berlin, _ := time.LoadLocation("Europe/Berlin")
	// 23:30 in Berlin (22:30 UTC).
	c := clock.NewFake(time.Date(2026, 11, 29, 22, 30, 0, 0, time.UTC))
	w := build(t, c, memstore.New(c), guard.Options{Location: berlin}, agentDef{
		name: "a", model: "priced-1", script: []config.ScriptStep{dollarText("done")}, limits: guard.Limits{DailyUSD: 1},
	})
	w.send("a", "spend the day's budget")
	if e := w.waitEvent(guard.EventTripped); e.Data["guardrail"] != guard.Daily {
		t.Fatalf("tripped %v", e.Data)
	}
	wait.For(t, "halted", func() bool { return w.agent("a").State() == driver.Halted })
	// The status says when the trip lifts by itself: Berlin's midnight.
	st, _ := w.guard.Status("a")
	if want := time.Date(2026, 11, 30, 0, 0, 0, 0, berlin); st.Timezone != "Europe/Berlin" || st.TripLiftsAt == nil || !st.TripLiftsAt.Equal(want) {
		t.Fatalf("status of a daily trip: timezone %q, lifts at %v; want Europe/Berlin, %v", st.Timezone, st.TripLiftsAt, want)
	}
	w.send("a", "queued overnight")
	c.Advance(29 * time.Minute) // 23:59 Berlin: still today
	if w.agent("a").State() != driver.Halted {
		t.Fatal("reopened before midnight")
	}
	c.Advance(time.Minute) // 00:00 Berlin
	w.waitEvent(guard.EventReset)
	w.waitEvent(events.TurnStarted)
}

func TestWorkerWideCeilingHaltsEveryAgent(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(epoch)
	w := build(t, c, memstore.New(c), guard.Options{WorkerDailyUSD: 1.5},
		agentDef{name: "a", model: "priced-1", script: []config.ScriptStep{dollarText("done")}},
		agentDef{name: "b", model: "priced-1", script: []config.ScriptStep{dollarText("done")}},
	)
	w.send("a", "spend $1")
	w.waitEvent(events.TurnCompleted)
	w.send("b", "spend $1 more")
	if e := w.waitEvent(guard.EventTripped); e.Data["guardrail"] != guard.WorkerDaily {
		t.Fatalf("tripped %v", e.Data)
	}
	wait.For(t, "both halted", func() bool {
		return w.agent("a").State() == driver.Halted && w.agent("b").State() == driver.Halted
	})
	if st, _ := w.guard.Status("b"); st.TripLiftsAt == nil || st.Timezone != "UTC" {
		t.Fatalf("status of a worker-wide trip: timezone %q, lifts at %v; want UTC and the next midnight", st.Timezone, st.TripLiftsAt)
	}
	if _, err := w.guard.Reset("a", guard.WorkerDaily, 1); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "both reopened", func() bool {
		return w.agent("a").State() != driver.Halted && w.agent("b").State() != driver.Halted
	})
}

func TestUnpricedModelWarnsAndIsStoppedByItsTokenCap(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(epoch)
	w := build(t, c, memstore.New(c), guard.Options{}, agentDef{
		name: "a", model: "mystery-model",
		script: []config.ScriptStep{{Call: &config.Call{Name: "report_done", Args: map[string]any{"summary": "x"}}, Usage: config.Usage{Input: 100, Output: 10}}},
		limits: guard.Limits{SessionUSD: 0.01, TokensPerTurn: 250},
	})
	if !strings.Contains(w.logs.String(), "model has no price") || !strings.Contains(w.logs.String(), "mystery-model") {
		t.Fatalf("no unpriced warning:\n%s", w.logs.String())
	}
	if w.guard.Priced("a") {
		t.Fatal("mystery-model priced")
	}
	w.send("a", "go")
	f := w.waitEvent(events.TurnFailed)
	if f.Data["outcome"] != driver.OutcomeCapped {
		t.Fatalf("outcome %v", f.Data)
	}
	if n := w.models["a"].Calls(); n != 3 {
		t.Fatalf("%d model calls; 3 × 110 tokens reach the cap of 250", n)
	}
	if w.agent("a").State() == driver.Halted {
		t.Fatal("a cap halted the agent; it should only stop the turn")
	}
	st, _ := w.guard.Status("a")
	if st.Session.SpentUSD != 0 {
		t.Fatalf("unpriced model charged $%v", st.Session.SpentUSD)
	}
}

func TestModelAndToolCallCapsStopTheTurnAndTellTheNextPrompt(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(epoch)
	w := build(t, c, memstore.New(c), guard.Options{}, agentDef{
		name: "a", model: "priced-1",
		script: []config.ScriptStep{{Call: &config.Call{Name: "report_done", Args: map[string]any{"summary": "x"}}}},
		limits: guard.Limits{ModelCallsPerTurn: 4},
	})
	w.send("a", "go")
	if e := w.waitEvent(guard.EventCapped); e.Data["limit"] != "model_calls_per_turn" {
		t.Fatalf("capped %v", e.Data)
	}
	w.waitEvent(events.TurnFailed)
	if n := w.models["a"].Calls(); n != 4 {
		t.Fatalf("%d model calls, cap 4", n)
	}
}

func TestResetRefusesUnknownGuardrailsAndBadAmounts(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(epoch)
	w := build(t, c, memstore.New(c), guard.Options{}, agentDef{name: "a", model: "priced-1", script: []config.ScriptStep{dollarText("x")}})
	for _, tc := range []struct {
		agent, guardrail string
		add              float64
	}{{"ghost", guard.Session, 0}, {"a", "vibes", 0}, {"a", guard.Session, -1}, {"a", guard.Turn, 5}, {"a", guard.Session, 1}} {
		if _, err := w.guard.Reset(tc.agent, tc.guardrail, tc.add); err == nil {
			t.Errorf("Reset(%s, %s, %v) succeeded", tc.agent, tc.guardrail, tc.add)
		}
	}
}

func TestOnlyCompletedResponsesAreCharged(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(epoch)
	g := guard.New(guard.Options{Store: memstore.New(c), Clock: c, Prices: guard.NewPrices(prices)})
	g.AddAgent("a", "priced-1", guard.Limits{})
	after := g.Plugin("a").AfterModelCallback()
	usage := &genai.GenerateContentResponseUsageMetadata{PromptTokenCount: 100_000}
	g.BeginTurn("a", hook.TurnInfo{})
	// A stream: two partial chunks carrying running usage, then the final.
	for _, partial := range []bool{true, true, false} {
		if _, err := after(nil, &model.LLMResponse{Partial: partial, UsageMetadata: usage}, nil); err != nil {
			t.Fatal(err)
		}
	}
	g.EndTurn("a")
	st, _ := g.Status("a")
	if st.Session.SpentUSD != 1 {
		t.Fatalf("charged $%v for one $1 response streamed in three chunks", st.Session.SpentUSD)
	}
}

func TestPricesMatchExactThenLongestPrefix(t *testing.T) {
	t.Parallel()
	p := guard.NewPrices(map[string]config.Price{"gpt-4.1": {InputPerMTok: 99}})
	for model, want := range map[string]float64{
		"gpt-4.1":                    99,   // config overrides the built-in row
		"gpt-4.1-mini-2025-04-14":    0.40, // longest prefix: gpt-4.1-mini, not gpt-4.1
		"claude-sonnet-4-5-20250929": 3,
	} {
		pr, ok := p.Lookup(model)
		if !ok || pr.Input != want {
			t.Errorf("Lookup(%q) = %+v %v, want input %v", model, pr, ok, want)
		}
	}
	if _, ok := p.Lookup("llama3.1:8b"); ok {
		t.Error("an unknown model is priced")
	}
	cost := guard.Price{Input: 3, CachedInput: 0.30, Output: 15, CacheWrite: 3.75}.Cost(guard.Usage{Input: 1_000_000, CachedInput: 500_000, CacheWrite: 100_000, Output: 10_000})
	if want := (400_000*3 + 500_000*0.30 + 100_000*3.75 + 10_000*15) / 1e6; cost != want {
		t.Errorf("cost %v, want %v", cost, want)
	}
}

// Status rounds money to micro-dollars, says what remains of each ceiling,
// and when the daily windows start over: the next midnight in the
// guard's time zone.
func TestStatusSaysWhatRemainsAndWhenItResets(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(epoch) // 10:00 UTC = 11:00 in Berlin
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	g := guard.New(guard.Options{Store: memstore.New(c), Clock: c, Prices: guard.NewPrices(prices), Location: berlin})
	g.AddAgent("a", "priced-1", guard.Limits{SessionUSD: 5, DailyUSD: 2})
	if err := g.Restore(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	g.Charge("a", 0.1)
	g.Charge("a", 0.2) // 0.30000000000000004 in floats
	st, _ := g.Status("a")
	if st.Session.SpentUSD != 0.3 || st.Session.RemainingUSD == nil || *st.Session.RemainingUSD != 4.7 || st.Session.ResetsAt != nil {
		t.Fatalf("session %+v", st.Session)
	}
	midnight := time.Date(2026, 11, 30, 0, 0, 0, 0, berlin)
	if st.Daily.RemainingUSD == nil || *st.Daily.RemainingUSD != 1.7 || st.Daily.ResetsAt == nil || !st.Daily.ResetsAt.Equal(midnight) {
		t.Fatalf("daily %+v, want 1.7 left, resetting at %v", st.Daily, midnight)
	}
	if st.Turn.RemainingUSD != nil {
		t.Fatalf("turn without a ceiling has a remainder: %+v", st.Turn)
	}
	// Each window names its guardrail as reset takes it.
	for _, c := range []struct{ got, want string }{{st.Turn.Guardrail, guard.Turn}, {st.Session.Guardrail, guard.Session}, {st.Daily.Guardrail, guard.Daily}, {st.WorkerDaily.Guardrail, guard.WorkerDaily}} {
		if c.got != c.want {
			t.Fatalf("guardrail %q, want %q", c.got, c.want)
		}
	}
	raw, _ := json.Marshal(st.Daily)
	if !strings.Contains(string(raw), `"remaining_usd":1.7`) || !strings.Contains(string(raw), `"resets_at":"2026-11-30T00:00:00+01:00"`) {
		t.Fatalf("daily JSON %s", raw)
	}
}
