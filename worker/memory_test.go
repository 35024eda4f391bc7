package worker

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/natsbus"
)

// Folds are charged to the agent's ledger — the guard's, the one its
// turns use — and a session ceiling they cross halts the agent, which
// then folds no more.
func TestMemoryFoldsChargedToLedgerAndCeilingStopsThem(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, setup{
		// The turns report no usage: only the folds cost anything, at a
		// price high enough that the second crosses the ceiling.
		script: `[{text: "noted"}]`,
		top:    "pricing:\n  fake: {input_per_mtok: 1000}\n",
		agent:  "    turn: {history_turns: 1}\n    budgets: {session_usd: 0.5}\n",
	})
	r := start(t, cfg, newRecorder(), clock.Real())
	trips := r.w.Events().Subscribe(10, func(e events.Event) bool { return e.Type == guard.EventTripped })
	subject := natsbus.Subjects{Prefix: "agents"}.Inbox("triage")
	var folded float64
	for i, text := range []string{"the certificate of api.example.com expires on friday", "second", "third"} {
		r.publish(subject, text)
		r.waitEvent(events.TurnCompleted)
		if i == 0 {
			continue
		}
		e := r.waitEvent(events.MemoryCompacted)
		cost, _ := e.Data["cost_usd"].(float64)
		if cost <= 0 {
			t.Fatalf("fold %d cost %v: a priced fold must cost something", i, e.Data["cost_usd"])
		}
		folded += cost
		if folded >= 0.5 {
			break
		}
	}
	if folded < 0.5 {
		t.Fatalf("folds cost $%.4f in all, below the ceiling; raise the price", folded)
	}
	var trip events.Event
	select {
	case trip = <-trips.C:
	case <-time.After(deadline):
		t.Fatal("no guardrail-tripped event")
	}
	if trip.Data["guardrail"] != guard.Session {
		t.Fatalf("trip %v", trip.Data)
	}
	st, _ := r.w.Guard().Status("triage")
	if math.Abs(st.Session.SpentUSD-folded) > 1e-9 {
		t.Fatalf("ledger session spend $%.6f, folds cost $%.6f: a fold was not charged (or charged twice)", st.Session.SpentUSD, folded)
	}
	a, _ := r.w.Driver().Agent("triage")
	if _, err := a.CompactMemory(context.Background(), hook.Audit{By: "test"}); err == nil {
		t.Fatal("a halted agent accepted a fold")
	}
	v, err := a.Memory(context.Background())
	if err != nil || !strings.Contains(v.Text, "the certificate of api.example.com expires on friday") {
		t.Fatalf("memory %+v, %v", v, err)
	}
	triage := map[string]string{"agent": "triage"}
	wait.Within(t, deadline, "the memory metrics", func() bool {
		fams := scrape(t, r)
		return math.Abs(value(t, fams, "agent_worker_memory_cost_usd_total", triage)-folded) < 1e-9 &&
			value(t, fams, "agent_worker_memory_compactions_total", map[string]string{"agent": "triage", "outcome": "completed"}) >= 2 &&
			value(t, fams, "agent_worker_memory_tokens", triage) == float64(v.Tokens)
	})
}

// The embedded demo (scripted demo model, history_turns 3) shows a memory
// after a few turns, with what its first message said.
func TestDemoBuildsAMemory(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.NATS.Listen = "-1"
	cfg.API.Listen = "127.0.0.1:0"
	cfg.Agents[0].WakeOnStart = false
	w, err := Start(context.Background(), cfg, Options{Clock: clock.Real()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(context.Background()) })
	sub := w.Events().Subscribe(1000, nil)
	r := &running{t: t, w: w, sub: sub}
	a, _ := w.Driver().Agent("demo")
	for i, text := range []string{"disk full on db-1", "cpu high on web-2", "db-1 cleaned up", "all quiet"} {
		a.Send(inbox.Message{Kind: inbox.Wake, Text: text, Source: "test"})
		r.waitEvent(events.TurnCompleted)
		if i == 3 {
			r.waitEvent(events.MemoryCompacted)
		}
	}
	v, err := a.Memory(context.Background())
	if err != nil || !strings.Contains(v.Text, `"disk full on db-1"`) || v.TurnsFolded != 3 {
		t.Fatalf("demo memory after 4 turns: %+v, %v", v, err)
	}
}
