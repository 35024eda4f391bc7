// Package memory is an agent's running memory: the turns that leave its
// history window are folded, by a model, into a bounded summary that is
// kept in the store and placed in every prompt, between the instruction
// and the recent turns, as the agent's own notes. It writes the summary
// request, reads and bounds the answer, and renders the notes; it must not
// decide when a fold runs, who pays for it or where it is stored — the
// driver does that between turns, charging the agent's guardrails.
//
// # Guarantees
//
//   - One fold is one model call: Summariser.Fold never retries by itself,
//     so a caller that folds between turns delays the next turn by at
//     most one call.
//   - The memory is bounded: a summary longer than Summariser.MaxTokens
//     (estimated at four characters a token, see Tokens) is clipped and
//     marked, never stored whole.
//   - The request of one fold is bounded: it takes the oldest turns that
//     fit MaxInputBytes (at least one, its texts clipped) and says how
//     many it took; the rest wait for the next fold.
//   - Turns are data: the request frames them as a record of what
//     happened, not as instructions, and so does the notes block.
//
// Not guaranteed: what the model keeps. A summary is lossy by nature; the
// request asks for facts, decisions, open tasks, names and numbers.
package memory
