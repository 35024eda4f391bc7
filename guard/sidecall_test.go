package guard_test

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/adk/model"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// dollarResponse is a response of 100k input tokens: $1 on priced-1.
func dollarResponse() *model.LLMResponse {
	return &model.LLMResponse{Content: genai.NewContentFromText("because the disk filled", genai.RoleModel),
		UsageMetadata: &genai.GenerateContentResponseUsageMetadata{PromptTokenCount: 100_000}}
}

// A side call is charged to the agent's session spend and metered as any
// model call, never to the running turn's spend (whose ceiling it would
// trip here); admission refuses a call whose estimate would reach a
// ceiling, naming it with the numbers, and then a tripped agent.
func TestSideCallsAreChargedOutsideTheTurnAndAdmittedAgainstCeilings(t *testing.T) {
	t.Parallel()
	bus := events.NewBus(0, nil)
	usage := bus.Subscribe(16, func(e events.Event) bool { return e.Type == guard.EventCharged })
	g := guard.New(guard.Options{Store: memstore.New(nil), Events: bus, Prices: guard.NewPrices(prices)})
	g.AddAgent("oncall", "priced-1", guard.Limits{TurnUSD: 0.5, SessionUSD: 3})
	if err := g.Restore(context.Background(), "oncall"); err != nil {
		t.Fatal(err)
	}

	g.BeginTurn("oncall", hook.TurnInfo{N: 1})
	if err := g.AdmitSideCall("oncall", 100_000); err != nil {
		t.Fatalf("a $1 call at $0 of $3 refused: %v", err)
	}
	if cost := g.ChargeSideCall("oncall", dollarResponse()); cost != 1 {
		t.Fatalf("charged $%v, want $1", cost)
	}
	st, _ := g.Status("oncall")
	if g.TurnCost("oncall") != 0 || st.Trip != nil || st.Session.SpentUSD != 1 {
		t.Fatalf("turn cost $%v, trip %+v, session spend $%v: want the call on the session, not the turn", g.TurnCost("oncall"), st.Trip, st.Session.SpentUSD)
	}
	g.EndTurn("oncall")
	e := <-usage.C
	if e.Data["cost_usd"] != 1.0 || e.Data["input_tokens"] != 100_000 || e.Data["model"] != "priced-1" {
		t.Fatalf("model-usage %v", e.Data)
	}

	g.ChargeSideCall("oncall", dollarResponse()) // $2 of $3
	err := g.AdmitSideCall("oncall", 100_000)
	var ce *guard.CeilingError
	if !errors.As(err, &ce) || ce.Guardrail != guard.Session || ce.SpentUSD != 2 || ce.CeilingUSD != 3 || ce.EstimateUSD != 1 || ce.Tripped {
		t.Fatalf("a $1 call at $2 of $3: %#v", err)
	}
	if st, _ := g.Status("oncall"); st.Trip != nil {
		t.Fatalf("a refused call tripped the agent: %+v", st.Trip)
	}
	if err := g.AdmitSideCall("oncall", 1000); err != nil {
		t.Fatalf("a $0.01 call at $2 of $3 refused: %v", err)
	}

	g.ChargeSideCall("oncall", dollarResponse()) // $3 of $3: trips
	err = g.AdmitSideCall("oncall", 0)
	if !errors.As(err, &ce) || !ce.Tripped || ce.Guardrail != guard.Session || !errors.Is(err, guard.ErrTripped) {
		t.Fatalf("a call of a tripped agent: %#v", err)
	}
}
