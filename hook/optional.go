package hook

import (
	"context"

	"google.golang.org/adk/model"
)

// Meter is a Guard that meters the turn's model usage; guard.Guard
// implements it. After EndTurn the driver asks every Meter and, when one
// counted more model calls than the driver saw, takes its numbers for the
// turn's summary: a response the guard stops a turn on is metered but
// never reaches the driver.
type Meter interface {
	// TurnUsage reports the agent's current (or last) turn's completed
	// model responses and tokens.
	TurnUsage(agent string) (modelCalls, tokensIn, tokensOut int)
}

// Pricer is a Guard that prices the turn's model calls; guard.Guard
// implements it. After EndTurn the driver adds every Pricer's TurnCost to
// the turn summary's cost (which stays 0 without one).
type Pricer interface {
	// TurnCost reports what the agent's current (or last) turn cost, in
	// USD.
	TurnCost(agent string) float64
}

// Charger is a Guard that takes spend from outside a turn's model calls;
// guard.Guard implements it. The driver charges the cost of a memory fold
// (a model call between turns) to every Charger, when the fold cost more
// than 0.
type Charger interface {
	// Charge adds usd to the agent's spend.
	Charge(agent string, usd float64)
}

// ChargeFlusher is a Guard that can store an agent's charges at once;
// guard.Guard implements it. Before the driver journals a model response
// of a turn with more than one step, it calls FlushAgent on every
// ChargeFlusher, so a response replayed after a crash (never charged
// again) was charged exactly once; an error fails the model call as a
// store outage.
type ChargeFlusher interface {
	// FlushAgent returns once the store holds every charge made to the
	// agent so far. It is called with a context that is not cancelled
	// with the turn.
	FlushAgent(ctx context.Context, agent string) error
}

// SideCallGuard is a Guard that admits and charges model calls made
// outside the agent's turns (an operator's ask); guard.Guard implements
// it. The driver asks every SideCallGuard before the ask's one model call
// (the first refusal refuses the ask) and has each charge the response
// after it; the ask's cost is the sum of what they return.
type SideCallGuard interface {
	// AdmitSideCall refuses, with an error, a call of about inputTokens
	// input tokens: the agent is tripped, or it would reach a ceiling.
	AdmitSideCall(agent string, inputTokens int) error
	// ChargeSideCall prices, meters and charges the call's response and
	// returns its cost in USD.
	ChargeSideCall(agent string, resp *model.LLMResponse) float64
}

// Keeper is a Guard that can keep what it holds of an agent across a
// let-go nobody used; guard.Guard implements it. When this replica takes
// back a lease that never left it (a lapse of its renewals that no other
// replica used), the driver calls Keep instead of Restore: the guard's
// state in memory is still the store's truth (plus whatever it could not
// write meanwhile), to be used and written from now on without reading
// the store again.
type Keeper interface {
	Keep(agent string)
}
