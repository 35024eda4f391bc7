// Package hook is the contract between the driver's turn loop and the
// plug-ins that watch it: the guardrails (package guard), the loop
// watchdog (package watchdog) and the subagents' owner hook (package
// background). It holds only interfaces, the values they exchange and
// the errors they stop a turn with; it must not import the driver or any
// plug-in, so that a plug-in never imports the loop it plugs into.
//
// # The calls a Guard receives
//
// The driver is given its guards in a list (driver.Deps.Guards) and
// consults them in that order at every step below. For each agent:
//
//   - Attach and then Plugin are called once, when the agent is built
//     (driver.New, or a config reload that adds the agent), before its
//     loop starts: Attach hands the guard the agent's Control, and the
//     ADK plugin Plugin returns (nil: none) is installed in the agent's
//     runner after the driver's own memory and steer plugins and before
//     its approval and journal plugins. A guard that is attached is
//     attached for the agent's lifetime; there is no detach.
//   - Restore is called once this replica owns the agent: when its loop
//     starts (or, with leases, when it gains the lease), and again each
//     time it gains the lease back. The driver retries it with backoff
//     until every guard's Restore succeeds, and runs no turn, fold or
//     ask for the agent before.
//   - Admit is called before every turn, after the pause/halt gate has
//     let it through and before the inbox is drained: an error refuses
//     the turn, and the driver halts the agent with the error's text
//     until Control.ClearHalt. Admit is also asked before a memory fold,
//     whose refusal only skips the fold.
//   - BeginTurn and EndTurn bracket every admitted turn, each called
//     once, in that order, from the agent's loop. EndTurn is called after
//     the turn's model and tool calls have ended (its context is
//     cancelled), and before the turn is recorded and its messages are
//     acknowledged, whether the turn completed or failed.
//
// Calls for one agent never overlap one another (they come from the
// agent's one loop), but calls for different agents do, and the plugin's
// callbacks run on the ADK runner's goroutines, tool callbacks possibly
// in parallel within a turn. The driver promises nothing about the order
// of calls across agents.
//
// # Optional methods
//
// A Guard may also implement any of Meter, Pricer, Charger, ChargeFlusher
// and SideCallGuard; the driver finds them by type assertion on each
// guard and calls them as their documentation says. A guard that
// implements none of them is still a complete Guard.
package hook
