package hook

import (
	"context"

	"google.golang.org/adk/plugin"
)

// Guard watches an agent's turns: it admits or refuses a turn after the
// pause/halt gate and before the inbox is drained (budgets), and watches
// inside the turn through an ADK plugin (metering, caps, loop detection).
// guard.Guard, watchdog.Watchdog and the subagents' owner hook
// (background.Manager.Guard) implement it. The package doc says when the
// driver calls each method.
type Guard interface {
	// Attach gives the guard its handle on an agent, before Start.
	Attach(agent string, ctl Control)
	// Restore loads the guard's durable state for the agent. The driver
	// retries it until it succeeds and runs no turn before.
	Restore(ctx context.Context, agent string) error
	// Admit refuses a turn with an error; the driver halts the agent
	// with it.
	Admit(ctx context.Context, agent string) error
	// BeginTurn and EndTurn bracket every admitted turn.
	BeginTurn(agent string, t TurnInfo)
	EndTurn(agent string)
	// Plugin returns the ADK plugin that watches the agent's turns, or
	// nil.
	Plugin(agent string) *plugin.Plugin
}

// TurnInfo tells guards about a turn as it begins.
type TurnInfo struct {
	// N is the turn's number.
	N uint64
	// Eager: only the agent's own timer woke the turn, and the model had
	// asked for it at the earliest it may (sleep.min or sooner, clamped):
	// the agent is re-running itself as fast as it is allowed to.
	Eager bool
}

// Control is what a Guard may do to an agent; the driver's agent
// (driver.Agent) implements it. Every method may be called from any
// goroutine, including the guard's plugin callbacks, and returns without
// waiting for the turn to end.
type Control interface {
	// Halt closes the gate and cancels the running turn.
	Halt(reason string)
	// ClearHalt reopens the gate.
	ClearHalt()
	// Note adds a remark to the agent's next prompt.
	Note(text string)
	// StopTurn cancels the running turn with cause, without halting.
	StopTurn(cause error)
}
