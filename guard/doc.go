// Package guard keeps agents' spend inside their ceilings: it prices every
// model response, checks the per-turn, per-session, per-day and
// worker-wide daily ceilings after each model call, stops a turn at its
// caps (model calls, tool calls, tokens), and halts an agent whose ceiling
// is crossed — durably, so a restart is not a way around it. It must not
// detect loops: that is the watchdog's job (it records its trips here).
//
// # Guarantees
//
//   - Spend is checked after every model call, not only between turns: a
//     long tool loop is stopped right after the call that crosses.
//   - A reset never lowers recorded spend; it may add budget. A reset that
//     would trip again at once is refused with the numbers.
//   - Every amount is finite: an added budget is from $0 to
//     MaxAddBudgetUSD a reset, and no reset lifts a ceiling above
//     MaxCeilingUSD (ErrBudget otherwise); a stored amount beyond
//     float64's range is repaired at load (an infinite spend to
//     MaxCeilingUSD, anything else to 0), logged and stored again, never
//     a failed restore. So no view, event or stored ledger holds +Inf or
//     NaN.
//   - Every decision is taken on the ledger in memory, which is always
//     current; each agent's ledger has its own lock, so charging one agent
//     never waits for another's store write (the worker-wide ledger is a
//     few instructions under its own lock).
//   - A trip is stored before the call that tripped returns (the turn
//     stops there), a reset and a charge from outside a turn (Charge: a
//     subagent's spend) before they return. A turn's spend is stored when
//     it ends (EndTurn), so the store lags the ledger by at most the
//     running turn; Shutdown stores whatever is left. Writes are
//     coalesced: each writes the latest state, at most one per ledger is
//     in flight, and agents ending turns together share one write of the
//     worker-wide ledger. Stored spend only grows (within a day).
//   - A failed write is logged, counted (WriteFailures) and retried with
//     backoff until it succeeds or Shutdown; the ledger in memory stays
//     authoritative, and the agent's next model call is held (an error
//     marked as a store outage, ErrUnstored) until its spend is stored.
//   - Spend, added budget and trips are restored before the agent runs
//     again.
//   - An unpriced model costs $0 and no cost ceiling binds it; its turns
//     are still bounded by the caps.
//   - Fenced writes: with Options.Owner set (several replicas), an
//     agent's ledger is written only by the replica that owns the agent
//     and only after it has loaded the stored ledger (Restore). A
//     standby's ledger — never restored, or stale since it lost the
//     agent — is never written over the owner's: the write is refused and
//     logged, and Reset returns ErrNotOwner or ErrNotLoaded without
//     changing anything.
//
// Not guaranteed: spend charged in a turn that had not ended when the
// process died without a clean shutdown (at most that turn's), nor spend
// whose write failed and that this replica no longer owns when the retry
// comes (the new owner's stored ledger is the truth). A model call
// already in flight when a ceiling is crossed by another agent
// (worker-wide ceiling) completes and is charged.
// A replica that loses an agent and wins it back before Restore runs
// again could reset from its old ledger in that moment (the driver
// restores at once on acquiring). The worker-wide ledger (guard._worker)
// is per replica: replicas owning different agents each write their own
// view of it.
package guard
