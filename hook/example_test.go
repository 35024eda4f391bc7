package hook_test

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/adk/plugin"

	"github.com/agent-worker/agent-worker/hook"
)

// turnLimit is a guard that lets each agent run max turns, then halts it.
// It has no plugin and implements none of the optional methods.
type turnLimit struct {
	max   uint64
	ctl   map[string]hook.Control
	turns map[string]uint64
}

var _ hook.Guard = (*turnLimit)(nil)

func (g *turnLimit) Attach(agent string, ctl hook.Control)   { g.ctl[agent] = ctl }
func (g *turnLimit) Restore(context.Context, string) error   { return nil }
func (g *turnLimit) Plugin(string) *plugin.Plugin            { return nil }
func (g *turnLimit) BeginTurn(agent string, t hook.TurnInfo) { g.turns[agent] = t.N }
func (g *turnLimit) EndTurn(agent string) {
	if g.turns[agent] >= g.max {
		g.ctl[agent].Halt(fmt.Sprintf("ran its %d turns", g.max))
	}
}
func (g *turnLimit) Admit(_ context.Context, agent string) error {
	if g.turns[agent] >= g.max {
		return fmt.Errorf("%w: ran its %d turns", hook.ErrHalted, g.max)
	}
	return nil
}

// printControl stands in for the driver's agent.
type printControl struct{}

func (printControl) Halt(reason string) { fmt.Println("halt:", reason) }
func (printControl) ClearHalt()         {}
func (printControl) Note(string)        {}
func (printControl) StopTurn(error)     {}

// Example plays the driver's part: attach, restore, then admit and
// bracket each turn until the guard refuses one.
func Example() {
	var g hook.Guard = &turnLimit{max: 2, ctl: map[string]hook.Control{}, turns: map[string]uint64{}}
	ctx := context.Background()
	g.Attach("oncall", printControl{})
	if err := g.Restore(ctx, "oncall"); err != nil {
		return
	}
	for n := uint64(1); ; n++ {
		if err := g.Admit(ctx, "oncall"); err != nil {
			fmt.Println("refused:", err, errors.Is(err, hook.ErrHalted))
			break
		}
		g.BeginTurn("oncall", hook.TurnInfo{N: n})
		fmt.Println("turn", n)
		g.EndTurn("oncall")
	}
	// Output:
	// turn 1
	// turn 2
	// halt: ran its 2 turns
	// refused: agent is halted: ran its 2 turns true
}

func ExampleCapError() {
	err := fmt.Errorf("turn 7: %w", &hook.CapError{Limit: "tool_calls_per_turn", Value: "20 tool calls"})
	fmt.Println(errors.Is(err, hook.ErrCapped))
	fmt.Println(err)
	// Output:
	// true
	// turn 7: turn stopped at a per-turn limit: tool_calls_per_turn (20 tool calls)
}

func ExampleAudit_Fields() {
	fmt.Println(hook.Audit{By: "alice", Reason: "db migration"}.Fields())
	fmt.Println(hook.Audit{}.Fields())
	// Output:
	// map[by:alice reason:db migration]
	// map[]
}
