package guard_test

import (
	"slices"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// An input whose response crosses tokens_per_turn stops its turn once and
// is charged once: its message is dead-lettered (turn_cap), not retried —
// however long the clock runs on — and the next message runs a turn of its
// own.
func TestCappedTurnIsChargedOnce(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(epoch)
	w := build(t, c, memstore.New(c), guard.Options{}, agentDef{
		name: "a", model: "priced-1",
		script: []config.ScriptStep{dollarText("a very long answer"), {Text: "ok", Usage: config.Usage{Input: 10}}},
		limits: guard.Limits{TokensPerTurn: 50_000, SessionUSD: 100},
	})
	w.agent("a").Send(inbox.Message{Kind: inbox.Wake, ID: "huge", Text: "summarise the whole log", Source: "test"})
	if d := w.waitEvent(events.MessageDropped); d.Data["id"] != "huge" || d.Data["reason"] != inbox.RejectTurnCap {
		t.Fatalf("message-dropped %v", d.Data)
	}
	if f := w.waitEvent(events.TurnFailed); f.Data["outcome"] != driver.OutcomeCapped {
		t.Fatalf("turn %v", f.Data)
	}
	c.Advance(24 * time.Hour) // any retry would be due by now
	w.agent("a").Send(inbox.Message{Kind: inbox.Wake, ID: "next", Text: "and this", Source: "test"})
	done := w.waitEvent(events.TurnCompleted)
	if ids, _ := done.Data["ids"].([]string); !slices.Equal(ids, []string{"next"}) {
		t.Fatalf("the completed turn handled %v, want only the next message", done.Data["ids"])
	}
	if n := w.models["a"].Calls(); n != 2 {
		t.Fatalf("%d model calls, want 2: the capped input is not tried again", n)
	}
	st, _ := w.guard.Status("a")
	if st.Session.SpentUSD != 1.0001 {
		t.Fatalf("spent $%v, want $1.0001: the capped call once, the next turn's once", st.Session.SpentUSD)
	}
}
