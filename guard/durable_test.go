package guard_test

// Tests of the coalesced, off-the-hot-path ledger writes: decisions on
// the ledger in memory, trips stored before the turn stops, spend stored
// by the end of its turn, everything on a clean shutdown, nothing by a
// standby, nothing lost to a store outage.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
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
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/outage"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// flakyStore counts the writes to guard keys and fails every call while
// down.
type flakyStore struct {
	store.Store
	down atomic.Bool
	puts atomic.Int64
}

var errDown = errors.New("store down (test)")

func (f *flakyStore) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	if f.down.Load() {
		return 0, errDown
	}
	f.puts.Add(1)
	return f.Store.Put(ctx, key, value)
}

func (f *flakyStore) Get(ctx context.Context, key string) (store.Entry, error) {
	if f.down.Load() {
		return store.Entry{}, errDown
	}
	return f.Store.Get(ctx, key)
}

// storedLedger is what the store holds of an agent's ledger.
type storedLedger struct {
	SessionSpent float64         `json:"session_spent_usd"`
	DaySpent     float64         `json:"day_spent_usd"`
	Trip         *map[string]any `json:"trip"`
}

func ledgerOf(t *testing.T, st store.Store, agent string) storedLedger {
	t.Helper()
	var l storedLedger
	if _, err := store.GetJSON(context.Background(), st, "guard."+agent, &l); err != nil {
		t.Fatalf("read guard.%s: %v", agent, err)
	}
	return l
}

func workerSpentOf(t *testing.T, st store.Store) float64 {
	t.Helper()
	var w struct {
		Spent float64 `json:"spent_usd"`
	}
	if _, err := store.GetJSON(context.Background(), st, "guard._worker", &w); err != nil {
		t.Fatal(err)
	}
	return w.Spent
}

// caller drives one agent's guard callbacks as a turn does.
type caller struct {
	t      *testing.T
	g      *guard.Guard
	before func() error
	after  func() error
}

func newCaller(t *testing.T, g *guard.Guard, agent string) *caller {
	p := g.Plugin(agent)
	bm, am := p.BeforeModelCallback(), p.AfterModelCallback()
	resp := &model.LLMResponse{UsageMetadata: &genai.GenerateContentResponseUsageMetadata{PromptTokenCount: 100_000}} // $1
	return &caller{t: t, g: g,
		before: func() error { _, err := bm(nil, &model.LLMRequest{}); return err },
		after:  func() error { _, err := am(nil, resp, nil); return err },
	}
}

// call makes one $1 model call: nil, or the error that stops the turn.
func (c *caller) call() error {
	if err := c.before(); err != nil {
		return err
	}
	return c.after()
}

func newGuard(t *testing.T, st store.Store, c clock.Clock, opts guard.Options, agents ...string) *guard.Guard {
	t.Helper()
	opts.Store, opts.Clock, opts.Prices = st, c, guard.NewPrices(prices)
	if opts.Log == nil {
		opts.Log = newLogger(&syncLog{})
	}
	g := guard.New(opts)
	for _, a := range agents {
		g.AddAgent(a, "priced-1", guard.Limits{TurnUSD: 2.5})
		if err := g.Restore(context.Background(), a); err != nil {
			t.Fatal(err)
		}
	}
	return g
}

// TestCeilingStopsTheCrossingCallWithWritesDeferred: model calls below
// the ceiling write nothing (the ledger in memory decides); the call that
// crosses the turn ceiling stops the turn, and its trip is in the store
// when the callback returns — before the turn ends.
func TestCeilingStopsTheCrossingCallWithWritesDeferred(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(epoch)
	st := &flakyStore{Store: memstore.New(c)}
	g := newGuard(t, st, c, guard.Options{}, "a")
	cl := newCaller(t, g, "a")
	g.BeginTurn("a", hook.TurnInfo{N: 1})
	st.puts.Store(0)
	for i := range 2 {
		if err := cl.call(); err != nil {
			t.Fatalf("call %d ($%d of $2.50): %v", i+1, i+1, err)
		}
	}
	if n := st.puts.Load(); n != 0 {
		t.Fatalf("%d store writes during the turn before any trip; want them deferred to its end", n)
	}
	err := cl.call() // $3: crosses $2.50
	if !errors.Is(err, hook.ErrHalted) {
		t.Fatalf("the crossing call returned %v, want ErrHalted", err)
	}
	l := ledgerOf(t, st, "a")
	if l.Trip == nil || (*l.Trip)["guardrail"] != guard.Turn || l.SessionSpent != 3 {
		t.Fatalf("stored ledger right after the crossing call: %+v; want the turn trip and $3", l)
	}
	if err := cl.call(); !errors.Is(err, hook.ErrHalted) {
		t.Fatalf("a call after the trip: %v", err)
	}
	g.EndTurn("a")
}

// TestSpendInTheStoreAtTurnEndEqualsMemory: during a turn the store may
// lag (by this turn at most); when EndTurn returns it holds exactly what
// the ledger in memory holds — the agent's and the worker-wide spend —
// with many agents ending turns at once, and the worker-wide ceiling
// trips exactly once when they cross it together.
func TestSpendInTheStoreAtTurnEndEqualsMemory(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(epoch)
	st := memstore.New(c)
	bus := events.NewBus(0, nil)
	trips := bus.Subscribe(100000, func(e events.Event) bool { return e.Type == guard.EventTripped })
	const agents, turns = 40, 5
	var names []string
	for i := range agents {
		names = append(names, fmt.Sprintf("a%d", i))
	}
	// Worker ceiling $150.5: crossed somewhere in the 3rd..4th turns.
	g := newGuard(t, st, c, guard.Options{Events: bus, WorkerDailyUSD: 150.5})
	for _, n := range names {
		g.AddAgent(n, "priced-1", guard.Limits{})
		if err := g.Restore(context.Background(), n); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for _, n := range names {
		cl := newCaller(t, g, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for turn := range turns {
				g.BeginTurn(n, hook.TurnInfo{N: uint64(turn + 1)})
				err := cl.call()
				g.EndTurn(n)
				s, _ := g.Status(n)
				var l storedLedger
				if _, err := store.GetJSON(context.Background(), st, "guard."+n, &l); err != nil || l.SessionSpent != s.Session.SpentUSD {
					t.Errorf("%s after turn %d: stored $%v (%v), in memory $%v", n, turn+1, l.SessionSpent, err, s.Session.SpentUSD)
				}
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	var sum float64
	for _, n := range names {
		s, _ := g.Status(n)
		if s.Trip == nil || s.Trip.Guardrail != guard.WorkerDaily {
			t.Errorf("%s not halted by the worker-wide ceiling: %+v", n, s.Trip)
		}
		sum += s.Session.SpentUSD
	}
	s, _ := g.Status("a0")
	if s.WorkerDaily.SpentUSD != sum || workerSpentOf(t, st) != sum {
		t.Fatalf("worker-wide spend: in memory $%v, stored $%v, sum of agents $%v", s.WorkerDaily.SpentUSD, workerSpentOf(t, st), sum)
	}
	if sum < 151 {
		t.Fatalf("spend $%v never crossed the $150.50 ceiling", sum)
	}
	n := 0
	for len(trips.C) > 0 {
		if e := <-trips.C; e.Data["guardrail"] == guard.WorkerDaily {
			n++
		}
	}
	if n != agents {
		t.Fatalf("%d worker-wide trip events; want one trip announced to each of the %d agents", n, agents)
	}
}

// TestCleanShutdownFlushesEverything: spend charged in turns that never
// reached EndTurn is stored by Shutdown.
func TestCleanShutdownFlushesEverything(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(epoch)
	st := memstore.New(c)
	g := newGuard(t, st, c, guard.Options{}, "a", "b")
	for _, n := range []string{"a", "b"} {
		g.BeginTurn(n, hook.TurnInfo{N: 1})
		if err := newCaller(t, g, n).call(); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b"} {
		if l := ledgerOf(t, st, n); l.SessionSpent != 1 {
			t.Fatalf("%s stored $%v after shutdown, want $1", n, l.SessionSpent)
		}
	}
	if workerSpentOf(t, st) != 2 {
		t.Fatalf("worker-wide spend stored $%v, want $2", workerSpentOf(t, st))
	}
	if u := g.Unstored(); len(u) != 0 {
		t.Fatalf("unstored after shutdown: %v", u)
	}
}

// TestStandbyEndOfTurnWriteIsRefused: an owner that loses the agent
// during a turn writes nothing at its end (the new owner's ledger stays),
// and must reload before it writes again.
func TestStandbyEndOfTurnWriteIsRefused(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(epoch)
	st := memstore.New(c)
	own := &owner{own: map[string]bool{"a": true}}
	g := newGuard(t, st, c, guard.Options{Owner: own}, "a")
	cl := newCaller(t, g, "a")
	g.BeginTurn("a", hook.TurnInfo{N: 1})
	if err := cl.call(); err != nil {
		t.Fatal(err)
	}
	g.EndTurn("a")
	before := stored(t, st, "guard.a")
	g.BeginTurn("a", hook.TurnInfo{N: 2})
	if err := cl.call(); err != nil {
		t.Fatal(err)
	}
	own.set("a", false) // the lease went mid-turn
	g.EndTurn("a")
	if err := g.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if after := stored(t, st, "guard.a"); string(after) != string(before) {
		t.Fatalf("a deposed owner wrote at the end of its turn:\nbefore %s\nafter  %s", before, after)
	}
	own.set("a", true)
	if _, err := g.Reset("a", guard.Turn, 0); !errors.Is(err, guard.ErrNotLoaded) {
		t.Fatalf("reset from the stale ledger: %v", err)
	}
}

// TestStoreOutageDuringChargingLosesNothing: the store fails while an
// agent charges. The turn's end cannot store its spend: the failure is
// counted, the ledger in memory still binds, the agent's next model call
// is held as a store outage (not blamed on the turn), and once the store
// is back the background retry stores everything. A second outage is
// bridged by Shutdown, which retries until the store answers.
func TestStoreOutageDuringChargingLosesNothing(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(epoch)
	st := &flakyStore{Store: memstore.New(c)}
	g := newGuard(t, st, c, guard.Options{}, "a")
	cl := newCaller(t, g, "a")

	g.BeginTurn("a", hook.TurnInfo{N: 1})
	if err := cl.call(); err != nil {
		t.Fatal(err)
	}
	st.down.Store(true)
	if err := cl.call(); err != nil {
		t.Fatalf("a charge with the store down: %v (the ledger in memory decides)", err)
	}
	g.EndTurn("a") // cannot store $2
	if g.WriteFailures() == 0 || len(g.Unstored()) != 1 {
		t.Fatalf("failures %d, unstored %v", g.WriteFailures(), g.Unstored())
	}
	s, _ := g.Status("a")
	if s.Session.SpentUSD != 2 {
		t.Fatalf("in memory $%v during the outage, want $2", s.Session.SpentUSD)
	}
	g.BeginTurn("a", hook.TurnInfo{N: 2})
	err := cl.call()
	if !outage.Is(err) || !errors.Is(err, guard.ErrUnstored) {
		t.Fatalf("the next turn's model call during the outage: %v; want it held as a store outage", err)
	}
	g.EndTurn("a")

	st.down.Store(false)
	c.Advance(time.Minute) // the background retry fires
	if u := g.Unstored(); len(u) != 0 {
		t.Fatalf("unstored after recovery: %v", u)
	}
	if l := ledgerOf(t, st, "a"); l.SessionSpent != 2 || workerSpentOf(t, st) != 2 {
		t.Fatalf("stored after recovery: agent $%v, worker $%v; want $2 each", l.SessionSpent, workerSpentOf(t, st))
	}
	g.BeginTurn("a", hook.TurnInfo{N: 3})
	if err := cl.call(); err != nil {
		t.Fatalf("a model call after recovery: %v", err)
	}

	// Another outage, across a clean shutdown.
	st.down.Store(true)
	g.EndTurn("a")
	failures := g.WriteFailures()
	done := make(chan error, 1)
	go func() { done <- g.Shutdown(context.Background()) }()
	wait.For(t, "a failed write during shutdown", func() bool { return g.WriteFailures() > failures })
	st.down.Store(false)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if l := ledgerOf(t, st, "a"); math.Abs(l.SessionSpent-3) > 1e-9 || workerSpentOf(t, st) != 3 {
		t.Fatalf("stored after shutdown: agent $%v, worker $%v; want $3 each", l.SessionSpent, workerSpentOf(t, st))
	}
}

// TestResetRightAfterATripRunsTheHaltedTurnsMessage: an operator resets
// the moment the trip is announced, while the halted turn may still be
// ending (its trip being stored). The message that turn held runs in the
// next turn either way; it is not left queued without a wake.
func TestResetRightAfterATripRunsTheHaltedTurnsMessage(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(epoch)
	w := build(t, c, memstore.New(c), guard.Options{}, agentDef{
		name: "a", model: "priced-1", script: []config.ScriptStep{dollarText("done")}, limits: guard.Limits{SessionUSD: 1},
	})
	w.send("a", "spend a dollar")
	w.waitEvent(guard.EventTripped)
	if _, err := w.guard.ResetAs("a", guard.Session, 2, hook.Audit{By: "alice"}); err != nil {
		t.Fatal(err)
	}
	w.waitEvent(events.TurnCompleted)
}

// TestCeilingLoweredBelowSpendTripsAtAdmission: a restart with a session
// ceiling below the stored spend trips when the next turn is admitted —
// stored at once, the agent halted, no model call (the halt is made after
// the driver's admission returns: it holds the agent's lock meanwhile).
func TestCeilingLoweredBelowSpendTripsAtAdmission(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(epoch)
	st := memstore.New(c)
	def := agentDef{name: "a", model: "priced-1", script: []config.ScriptStep{dollarText("done")}, limits: guard.Limits{SessionUSD: 5}}
	w := build(t, c, st, guard.Options{}, def)
	w.send("a", "one")
	w.waitEvent(events.TurnCompleted)
	w.send("a", "two")
	w.waitEvent(events.TurnCompleted)
	w.driver.Shutdown(context.Background())

	def.limits.SessionUSD = 1
	w2 := build(t, c, st, guard.Options{}, def)
	w2.send("a", "three")
	if e := w2.waitEvent(guard.EventTripped); e.Data["guardrail"] != guard.Session {
		t.Fatalf("tripped %v", e.Data)
	}
	wait.For(t, "halted", func() bool { return w2.agent("a").State() == driver.Halted })
	if n := w2.models["a"].Calls(); n != 0 {
		t.Fatalf("%d model calls past the lowered ceiling", n)
	}
	if l := ledgerOf(t, st, "a"); l.Trip == nil || l.SessionSpent != 2 {
		t.Fatalf("stored %+v; want the session trip at $2", l)
	}
}
