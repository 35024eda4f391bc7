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
//   - A turn cut at a per-turn limit after it spent money (a cap, or
//     turn.timeout after a model response: isCut, cut.go) is not retried:
//     its messages are dead-lettered with reason turn_cap, its tasks are
//     dropped, and the next prompt says what was cut. The same input is
//     never charged twice for crossing the same limit.
//   - No empty turns (idle.go): a wake that leaves a turn nothing to do —
//     an operator's bare wake or resume, a retry whose messages are gone —
//     calls no model; a turn-skipped event and a log line say so.
//   - Shutdown starts no new turn, lets running turns finish until its
//     context ends, then cancels them.
//   - Handover: Release starts no new turn and waits for the running one
//     without ever cancelling it; SetOwned(false) afterwards cancels
//     nothing. Losing the lease (SetOwned(false) without Release) cancels
//     the running turn at once: another replica may own the agent already.
//   - Fenced writes: an agent's durable state (its pause, its model
//     switch) is written only by the replica that owns it — not in
//     standby, and owned according to the scheduler's Owner
//     (scheduler.Options.Owner; the worker's is the lease manager).
//     Elsewhere the write is refused and logged (ErrNotOwner) and the
//     stored state stays the owner's.
//   - Model switch (SwitchModel, model.go): an operator's switch to
//     another configured model is used from the agent's next model call,
//     stored before it is answered, restored before the first turn after
//     a restart or a change of owner, and dropped (logged, evented) when
//     the config no longer has the model.
//   - Running memory (Spec.Memory, memory.go): turns that leave the
//     history window are folded into the agent's memory between turns,
//     in batches (memory_batch.go: all but the newest tenth of the window
//     in one call, so one fold per ten turns at history_turns 10), one
//     model call at a time, so a wake waits for at most one fold; a
//     fold is admitted and charged by the guards like a turn's calls (a
//     halted agent does not fold); a failed fold deletes nothing and is
//     retried after the Retry backoff; only the owner writes the memory.
//   - Asks (Agent.Ask, ask.go): an operator's side question is answered
//     by one model call on what a turn's call sees (instruction, memory,
//     the history window as a snapshot) and writes nothing — no history,
//     memory, inbox or journal — and runs no tool; it takes no turn lock,
//     so it is answered while the agent sleeps, is paused or runs a turn,
//     one ask at a time; it is admitted and charged by the guards outside
//     any turn's spend, and refused while halted.
//
// Message ids and the turn log:
//
//   - Every message has an id (one is made up, "msg-…", when it arrives
//     without). Turn events name the ids they drained (the first
//     MaxEventIDs, "ids"; "messages" counts them all), and each message
//     of a completed turn gets a message-handled event after
//     turn-completed. Agent.Message says where a message is in the
//     owner's memory: queued, running (in turn N) or handled (by a turn
//     of the history window).
//   - Every turn, completed or not, leaves one summary in the turn log
//     (Driver.TurnLog, package turnlog), appended in the background —
//     no turn waits on it — and only while this replica owns the agent.
//     A message dropped that only memory held (not in the log) leaves a
//     dead-letter record under its id. Shutdown waits a few seconds for
//     those writes.
//
// Not guaranteed: a turn that was cancelled may already have run tools
// with side effects; its messages will be seen again (at-least-once).
package driver
