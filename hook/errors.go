package hook

import (
	"errors"
	"fmt"
)

// Errors a guard stops a turn with, as the turn's context cause; the
// driver tells the turn's outcome by them (errors.Is).
var (
	// ErrHalted is the cause of a turn cancelled because its agent was
	// halted (Control.Halt, a guardrail trip), and what the driver's
	// operator calls refuse a halted agent with.
	ErrHalted = errors.New("agent is halted")
	// ErrCapped wraps the cause of a turn stopped at a per-turn cap
	// (a *CapError says which).
	ErrCapped = errors.New("turn stopped at a per-turn limit")
)

// CapError is the cause of a turn stopped at a per-turn cap: which limit
// (tokens_per_turn, tool_calls_per_turn, model_calls_per_turn) and its
// value in words ("500000 tokens"). It is ErrCapped.
type CapError struct {
	Limit, Value string
}

func (e *CapError) Error() string { return fmt.Sprintf("%v: %s (%s)", ErrCapped, e.Limit, e.Value) }

// Unwrap makes a CapError ErrCapped.
func (e *CapError) Unwrap() error { return ErrCapped }
