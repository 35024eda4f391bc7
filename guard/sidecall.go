package guard

import (
	"context"
	"errors"
	"fmt"

	"github.com/agent-worker/agent-worker/money"
	"google.golang.org/adk/model"
)

// A side call is a model call an agent makes outside its turns on an
// operator's behalf (an ask, driver.Agent.Ask): the guard admits it
// against the agent's ceilings, then prices, meters and charges its
// response like a turn's — to the agent's session and daily spend and the
// worker's, never to the running turn's (no turn_usd, no per-turn cap).

// CeilingError refuses a side call before it is made (HTTP 409): the
// agent (or the worker) is tripped, or the call's estimated cost would
// take the agent's spend to a ceiling. It names the guardrail with the
// numbers an operator needs. A refusal changes nothing: no trip, no halt.
type CeilingError struct {
	Guardrail string `json:"guardrail"`
	Reason    string `json:"reason"`
	// SpentUSD and CeilingUSD are the window's spend and ceiling (budget
	// added by resets included); 0 for a trip that has none (watchdog).
	SpentUSD   float64 `json:"spent_usd,omitempty"`
	CeilingUSD float64 `json:"ceiling_usd,omitempty"`
	// EstimateUSD is what the call was estimated to cost: its input
	// tokens at the model's input price (its output is not known yet).
	EstimateUSD float64 `json:"estimate_usd,omitempty"`
	// Tripped: the guardrail had tripped already (the agent is halted).
	Tripped bool `json:"tripped,omitempty"`
}

func (e *CeilingError) Error() string { return e.Reason }

// Unwrap makes errors.Is(err, ErrTripped) hold for a trip.
func (e *CeilingError) Unwrap() error {
	if e.Tripped {
		return ErrTripped
	}
	return nil
}

// AdmitSideCall (with ChargeSideCall, hook.SideCallGuard) decides whether
// the agent may make a side call whose request holds about inputTokens
// tokens. It refuses, with a *CeilingError, an agent or worker that is
// tripped, and a call whose input alone, at the agent's model's input
// price, would bring the agent's session, daily or worker-wide spend to
// its ceiling. An unpriced model costs nothing, so only a trip refuses it.
// Admission reserves nothing: the response's real cost is charged by
// ChargeSideCall and may still cross a ceiling, which then trips as after
// any call.
func (g *Guard) AdmitSideCall(agent string, inputTokens int) error {
	if err := g.Admit(context.Background(), agent); err != nil {
		if st, ok := g.Status(agent); ok && st.Trip != nil {
			t := st.Trip
			return &CeilingError{Guardrail: t.Guardrail, Reason: t.Reason, SpentUSD: t.Spent, CeilingUSD: t.Ceiling, Tripped: true}
		}
		return &CeilingError{Reason: err.Error(), Tripped: errors.Is(err, ErrTripped)}
	}
	l := g.ledger(agent)
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.priced {
		return nil
	}
	est := l.price.Cost(Usage{Input: inputTokens})
	session, daily := l.ceilings()
	g.wmu.Lock()
	worker, workerSpent := g.workerCeiling(), g.worker.Spent
	g.wmu.Unlock()
	for _, c := range []struct {
		guardrail      string
		spent, ceiling float64
		window         string
	}{
		{Session, l.st.SessionSpent, session, "session spend"},
		{Daily, l.st.DaySpent, daily, "spend today"},
		{WorkerDaily, workerSpent, worker, "worker-wide spend today"},
	} {
		if c.ceiling > 0 && c.spent+est >= c.ceiling {
			return &CeilingError{Guardrail: c.guardrail, SpentUSD: micro(c.spent), CeilingUSD: micro(c.ceiling), EstimateUSD: micro(est),
				Reason: fmt.Sprintf("%s %s plus this call's estimated %s would reach the %s ceiling of %s", c.window, money.USD(c.spent), money.USD(est), c.guardrail, money.USD(c.ceiling))}
		}
	}
	return nil
}

// ChargeSideCall prices the agent's side-call response resp like a turn's
// (the model that answered it, a fallback's own price), publishes its
// model-usage event, so the model token and cost metrics count it as any
// call, and charges it to the agent's session and daily spend and the
// worker's — not to the running turn's. A crossed ceiling trips and halts
// the agent as after any call. The charge is stored when ChargeSideCall
// returns (or, the store failing, retried until it is). It returns the
// cost in USD (0 for an unpriced model or an agent the guard does not
// know).
func (g *Guard) ChargeSideCall(agent string, resp *model.LLMResponse) float64 {
	l := g.ledger(agent)
	if l == nil || resp == nil {
		return 0
	}
	u := UsageOf(resp.UsageMetadata, resp.CustomMetadata)
	l.mu.Lock()
	cost := g.meterLocked(l, resp, u)
	g.chargeLocked(l, cost, false)
	calls := g.release(l)
	g.flushNow(l)
	calls()
	return cost
}
