// Package scheduler decides when agents wake on time: cron schedules
// (github.com/robfig/cron/v3) and each agent's one pending timer (the wake
// the model asked for with schedule_next_turn, or the heartbeat). It hands
// fires to a Target and must not decide what a turn does.
//
// # Guarantees
//
//   - A tick fires at most once across every scheduler sharing a store:
//     before firing, the tick (agent, schedule, scheduled time) is claimed
//     with a set-if-absent write that expires; only the winner fires.
//   - Missed ticks are skipped, never backfilled. Ticks that fell due
//     while no scheduler ran (worker down) are counted as missed at start;
//     a timer that fires late fires only the latest due tick and counts the
//     earlier ones as missed.
//   - Overlap is explicit: skip (default) drops a tick while the agent's
//     turn runs; queue keeps at most one pending fire; replace interrupts
//     the running turn. A paused or halted agent's ticks are skipped and
//     not replayed on resume.
//   - Timers are durable: the pending timer of each agent is stored, and
//     after a restart it fires at its time (at once if it fell due while
//     the worker was down).
//   - Fenced writes: with Options.Owner set (several replicas), an
//     agent's stored timer and last handled tick are written, and its
//     ticks claimed, only by the replica that owns the agent; anywhere
//     else the write is refused and logged (ErrNotOwner), so a standby
//     never replaces the owner's timer.
//
// Not guaranteed: a tick claimed by a scheduler that then dies before
// delivering it is lost, not retried.
package scheduler
