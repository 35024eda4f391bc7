package guard_test

import (
	"math"
	"strings"
	"testing"

	"google.golang.org/adk/model"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// A response a fallback served is charged at the fallback's price and
// announced under its name; the agent's own responses keep theirs.
func TestFallbackResponsesChargedAtTheirOwnPrice(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(epoch)
	bus := events.NewBus(0, nil)
	sub := bus.Subscribe(100, func(e events.Event) bool { return e.Type == guard.EventCharged })
	logs := &syncLog{}
	g := guard.New(guard.Options{Store: memstore.New(c), Clock: c, Events: bus, Log: newLogger(logs),
		Prices: guard.NewPrices(map[string]config.Price{"big-1": {InputPerMTok: 10}, "small-1": {InputPerMTok: 1}})})
	g.AddAgent("a", "big-1", guard.Limits{})
	g.AddFallbacks("a", "small-1", "free-1")
	if !strings.Contains(logs.String(), `msg="fallback model has no price: its responses cost $0 here and no cost ceiling binds them; token and turn caps still apply" agent=a model=free-1`) ||
		strings.Contains(logs.String(), "model=small-1") {
		t.Errorf("start-up warnings:\n%s", logs.String())
	}
	if !g.PricedModel("small-1") || g.PricedModel("free-1") {
		t.Error("PricedModel disagrees with the pricing table")
	}
	if err := g.Restore(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	p := g.Plugin("a")
	respond := func(servedBy string) {
		t.Helper()
		resp := &model.LLMResponse{UsageMetadata: &genai.GenerateContentResponseUsageMetadata{PromptTokenCount: 100_000}}
		if servedBy != "" {
			resp.CustomMetadata = map[string]any{hook.ServedByKey: servedBy}
		}
		if _, err := p.BeforeModelCallback()(nil, &model.LLMRequest{}); err != nil {
			t.Fatal(err)
		}
		if _, err := p.AfterModelCallback()(nil, resp, nil); err != nil {
			t.Fatal(err)
		}
	}
	respond("")        // the agent's model: $1.00
	respond("small-1") // its priced fallback: $0.10
	respond("free-1")  // an unpriced fallback: $0, said so
	want := []struct {
		model  string
		cost   float64
		priced bool
	}{{"big-1", 1, true}, {"small-1", 0.1, true}, {"free-1", 0, false}}
	for i, w := range want {
		e := <-sub.C
		if e.Data["model"] != w.model || math.Abs(e.Data["cost_usd"].(float64)-w.cost) > 1e-12 || e.Data["priced"] != w.priced {
			t.Errorf("charge %d: %v, want model %s cost %v priced %v", i, e.Data, w.model, w.cost, w.priced)
		}
	}
	st, _ := g.Status("a")
	if math.Abs(st.Session.SpentUSD-1.1) > 1e-12 {
		t.Errorf("session spend $%v, want $1.10", st.Session.SpentUSD)
	}
}
