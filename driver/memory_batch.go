package driver

import "github.com/agent-worker/agent-worker/history"

// Batch folding. The window's budget is its turn count, history_turns:
// that is how the history measures what the model sees (the newest
// turns, not tokens) and how the store bounds what it keeps (records per
// agent), and no per-turn token estimate exists to measure it otherwise.
//
// A fold is due when a turn has left the window: it holds more than
// history_turns unfolded turns. A due fold then takes in, in one model
// call, every unfolded turn but the newest keepAfterFold — a tenth of the
// window, at least one — so the window drops well under its budget and
// grows back a turn at a time for history_turns+1-keep turns before the
// next fold is due. At the default history_turns 10 that is one fold call
// per 10 turns, where folding each turn as it left made one per turn (see
// BenchmarkMemoryFoldCalls). The prompt stays bounded as before: the
// model never sees more than history_turns turns, and sees fewer, the
// memory in their place, right after a fold.
//
// A request bound (memory.Summariser.MaxInputBytes) may cut a batch
// short: the fold takes the oldest that fit and the rest wait for the
// next due fold, still within the window.

// keepAfterFold is how many of the newest turns a batch fold leaves
// unfolded in a window of window turns: a tenth of it, rounded up.
func keepAfterFold(window int) int {
	return (max(window, 1) + 9) / 10
}

// foldBatch returns the turns a due fold takes in from unfolded (every
// committed turn not yet folded, oldest first): all but the newest keep,
// and at least the oldest, which has left the window.
func foldBatch(unfolded []history.Held, keep int) []history.Held {
	n := max(len(unfolded)-keep, min(len(unfolded), 1))
	return unfolded[:n]
}
