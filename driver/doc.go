// Package driver runs one loop per agent: it sleeps until a wake source
// fires, opens the gate (paused? halted? budgets?), drains the inbox into
// one framed prompt, runs one turn through ADK, and decides when to wake
// next. It is handed everything it touches (clock, store, event bus, model)
// and must not know about NATS, Redis or HTTP.
//
// # States
//
// An agent is sleeping, running, paused, halted or stopped. Paused and
// halted are gates: wakes that arrive behind them are kept (and messages
// stay queued) but no turn starts until Resume or ClearHalt.
//
// # Guarantees
//
//   - Wakes that land while a turn runs coalesce into one next turn.
//   - A deferred message never wakes the agent; it rides along with the
//     next turn.
//   - Interrupt(hold=true) cancels the running turn and closes the gate
//     under one lock, so no turn can start in between.
//   - A turn that asks for no wake does not run again at once: the agent
//     sleeps until a real wake source or its heartbeat (sleep.default).
//   - A turn that fails or is interrupted leaves no trace in history and
//     puts its messages back in the inbox; a message that fails MaxAttempts
//     turns is dropped, logged and announced as an event.
//   - Shutdown starts no new turn, lets running turns finish until its
//     context ends, then cancels them.
//   - Handover: Release starts no new turn and waits for the running one
//     without ever cancelling it; SetOwned(false) afterwards cancels
//     nothing. Losing the lease (SetOwned(false) without Release) cancels
//     the running turn at once: another replica may own the agent already.
//   - Fenced writes: an agent's durable state (its pause) is written only
//     by the replica that owns it — not in standby, and owned according
//     to the scheduler's Owner (scheduler.Options.Owner; the worker's is
//     the lease manager). Elsewhere the write is refused and logged
//     (ErrNotOwner) and the stored state stays the owner's.
//
// Not guaranteed: a turn that was cancelled may already have run tools
// with side effects; its messages will be seen again (at-least-once).
package driver
