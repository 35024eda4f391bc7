package guard

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/adk/agent"
	"google.golang.org/adk/model"
	"google.golang.org/adk/plugin"
	"google.golang.org/adk/tool"

	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/outage"
)

// BeginTurn implements hook.Guard.
func (g *Guard) BeginTurn(agent string, _ hook.TurnInfo) {
	if l := g.ledger(agent); l != nil {
		l.mu.Lock()
		l.inTurn, l.turnSpent, l.modelCalls, l.toolCalls, l.tokens, l.stopped = true, 0, 0, 0, 0, nil
		l.tokensIn, l.tokensOut, l.responses = 0, 0, 0
		l.mu.Unlock()
	}
}

// EndTurn implements hook.Guard. It stores the turn's spend (the
// agent's ledger, and the worker-wide one shared with the agents ending
// their turns at the same time) before it returns, so the driver records
// the turn and acks its messages only once the spend is durable: the
// store lags the ledger in memory by at most the running turn. A failed
// write is retried in the background, and the agent's next model call
// waits for it (see beforeModel).
func (g *Guard) EndTurn(agent string) {
	if l := g.ledger(agent); l != nil {
		l.mu.Lock()
		l.inTurn = false
		l.mu.Unlock()
		g.flushNow(l)
	}
}

// TurnUsage implements hook.Meter: it reports what the agent's current (or
// last) turn consumed as the guard metered it: completed model responses
// and tokens. The driver prefers it to what it saw, because a response the
// guard stops a turn on is charged but never reaches the driver.
func (g *Guard) TurnUsage(agent string) (modelCalls, tokensIn, tokensOut int) {
	if l := g.ledger(agent); l != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.responses, l.tokensIn, l.tokensOut
	}
	return 0, 0, 0
}

// TurnCost implements hook.Pricer: it reports what the agent's current (or
// last) turn has cost, in USD, as the guard priced it (0 for an unpriced
// model). The driver puts it in the turn's summary.
func (g *Guard) TurnCost(agent string) float64 {
	if l := g.ledger(agent); l != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.turnSpent
	}
	return 0
}

// Plugin implements hook.Guard: the ADK callbacks that meter and cap the
// agent's turns from inside.
func (g *Guard) Plugin(name string) *plugin.Plugin {
	p, _ := plugin.New(plugin.Config{
		Name: "guard",
		BeforeModelCallback: func(agent.CallbackContext, *model.LLMRequest) (*model.LLMResponse, error) {
			return nil, g.beforeModel(name)
		},
		AfterModelCallback: func(_ agent.CallbackContext, resp *model.LLMResponse, err error) (*model.LLMResponse, error) {
			if resp == nil || resp.Partial {
				// Streamed partial responses may carry running usage; only
				// the completed response is charged, once.
				return nil, nil
			}
			return nil, g.afterModel(name, resp)
		},
		BeforeToolCallback: func(_ tool.Context, _ tool.Tool, _ map[string]any) (map[string]any, error) {
			return g.beforeTool(name)
		},
		OnModelErrorCallback: func(_ agent.CallbackContext, _ *model.LLMRequest, err error) (*model.LLMResponse, error) {
			failed := g.modelOf(name)
			var served interface{ ServedBy() string } // models.ServedError: a model the agent was switched to
			if errors.As(err, &served) && served.ServedBy() != "" {
				failed = served.ServedBy()
			}
			g.emit(name, EventModelError, map[string]any{"model": failed, "error": err.Error()})
			return nil, nil
		},
		AfterToolCallback: func(_ tool.Context, t tool.Tool, _, result map[string]any, err error) (map[string]any, error) {
			outcome := "ok"
			if err != nil || result["error"] != nil {
				outcome = "error"
			}
			g.emit(name, EventToolCall, map[string]any{"tool": t.Name(), "outcome": outcome})
			return nil, nil
		},
	})
	return p
}

// ErrUnstored is wrapped (marked as a store outage) by the error that
// holds a model call while the agent's earlier spend is not stored yet.
var ErrUnstored = errors.New("the agent's earlier spend is not stored yet")

// beforeModel stops the turn before a model call beyond the cap, and
// holds it while an earlier write of the agent's ledger is failing: no
// model call is made while the store is behind by more than this turn.
func (g *Guard) beforeModel(name string) error {
	l := g.ledger(name)
	if l == nil {
		return nil
	}
	l.mu.Lock()
	failing := l.failing
	l.mu.Unlock()
	if failing {
		if err := g.flushWithin(l); err != nil && !errors.Is(err, ErrNotOwner) && !errors.Is(err, ErrNotLoaded) {
			return outage.Mark("store", fmt.Errorf("%w: %w", ErrUnstored, err))
		}
	}
	l.mu.Lock()
	defer g.unlock(l)
	if l.stopped != nil {
		return l.stopped
	}
	if t := l.st.Trip; t != nil {
		// Tripped mid-turn (the watchdog, a subagent's spend): no further
		// model call, not even one that would fail on the cancelled turn.
		return fmt.Errorf("%w: %s", hook.ErrHalted, t.Reason)
	}
	g.wmu.Lock()
	wt := g.worker.Trip
	g.wmu.Unlock()
	if wt != nil {
		return fmt.Errorf("%w: %s", hook.ErrHalted, wt.Reason)
	}
	if lim := l.limits.ModelCallsPerTurn; lim > 0 && l.modelCalls >= lim {
		return g.capLocked(l, "model_calls_per_turn", fmt.Sprintf("%d model calls", lim))
	}
	l.modelCalls++
	return nil
}

// afterModel charges a completed response, at the price of the model that
// answered it, and checks ceilings and the token cap. It decides on the
// ledger in memory and writes nothing, except a trip: that is stored
// before the call returns and the turn stops. The rest of the turn's
// spend is stored when it ends (EndTurn).
func (g *Guard) afterModel(name string, resp *model.LLMResponse) error {
	u := UsageOf(resp.UsageMetadata, resp.CustomMetadata)
	l := g.ledger(name)
	if l == nil {
		return nil
	}
	l.mu.Lock()
	cost := g.meterLocked(l, resp, u)
	l.tokens += u.Input + u.Output
	l.tokensIn += u.Input
	l.tokensOut += u.Output
	l.responses++
	if t := g.chargeLocked(l, cost, true); t != nil {
		// The trip is stored before the agent is halted and the turn
		// stops; the halt keeps its place before any later reopening.
		calls := g.release(l)
		g.flushNow(l)
		calls()
		return fmt.Errorf("%w: %s", hook.ErrHalted, t.Reason)
	}
	var err error
	if lim := l.limits.TokensPerTurn; lim > 0 && l.tokens >= lim {
		err = g.capLocked(l, "tokens_per_turn", fmt.Sprintf("%d tokens", lim))
	}
	g.unlock(l)
	return err
}

// meterLocked prices resp (usage u) at the price of the model that
// answered it — the agent's, or the fallback it names (hook.ServedByKey) —
// and publishes its model-usage event (EventCharged), which the metrics
// count. It returns the cost; charging it is the caller's. Callers hold
// l.mu.
func (g *Guard) meterLocked(l *ledger, resp *model.LLMResponse, u Usage) float64 {
	served, price, priced := l.model, l.price, l.priced
	if s, _ := resp.CustomMetadata[hook.ServedByKey].(string); s != "" && s != l.model {
		// A fallback answered: its own price, under its own name.
		served = s
		price, priced = g.prices().Lookup(s)
	}
	cost := 0.0
	if priced {
		cost = price.Cost(u)
	}
	g.emit(l.name, EventCharged, map[string]any{"model": served, "input_tokens": u.Input, "cached_input_tokens": u.CachedInput,
		"cache_write_tokens": u.CacheWrite, "output_tokens": u.Output, "cost_usd": cost, "priced": priced})
	return cost
}

// beforeTool refuses a tool call beyond the cap and stops the turn.
func (g *Guard) beforeTool(name string) (map[string]any, error) {
	l := g.ledger(name)
	if l == nil {
		return nil, nil
	}
	l.mu.Lock()
	defer g.unlock(l)
	if lim := l.limits.ToolCallsPerTurn; lim > 0 && l.toolCalls >= lim {
		_ = g.capLocked(l, "tool_calls_per_turn", fmt.Sprintf("%d tool calls", lim))
		return map[string]any{"error": fmt.Sprintf("not run: this turn reached its limit of %d tool calls", lim)}, nil
	}
	l.toolCalls++
	return nil, nil
}

// capLocked stops the running turn at a cap (the agent is not halted):
// the returned error ends the turn where the callback returns it, and
// every later model call of the turn is refused too. The next prompt is
// told. Callers hold l.mu.
func (g *Guard) capLocked(l *ledger, limit, what string) error {
	err := &hook.CapError{Limit: limit, Value: what}
	if l.stopped != nil {
		return l.stopped
	}
	l.stopped = err
	g.o.Log.Warn("turn stopped at a per-turn limit", "agent", l.name, "limit", limit, "value", what)
	g.emit(l.name, EventCapped, map[string]any{"limit": limit, "value": what})
	if ctl := g.ctl(l.name); ctl != nil {
		l.after = append(l.after, call{f: func() {
			ctl.Note(fmt.Sprintf("your previous turn was stopped after %s, this agent's limit per turn. Work in fewer steps.", what))
		}})
	}
	return err
}

func (g *Guard) modelOf(agent string) string {
	if l := g.ledger(agent); l != nil {
		return l.model
	}
	return ""
}

// flushWithin is flushNow that returns the error.
func (g *Guard) flushWithin(l *ledger) error {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	return g.flush(ctx, l)
}
