// Package turnlog is what an operator reads after the fact: a bounded list
// of each agent's recent turn summaries (completed or failed, with their
// messages, tool calls, final text, tokens and cost) and what became of
// individual messages that left without a turn (dead-lettered, and why).
// Which turn handled a message is read from the summaries.
// It keeps them in the store, so any replica can answer for any agent. It
// records and reads; it must not decide anything about turns or messages.
//
// # Store keys
//
//	key                             written by             bound
//	turnlog.<agent>                 the agent's owner      a list of the newest Keep turn summaries, one item per turn
//	deadletter.<agent>.<hash(id)>   the input log, driver  one per dead-lettered message id: {id, reason, detail, subject, dlq, at}; expires after its TTL (24h)
//
// Summaries and dead-letter records are written in the background, in
// order per agent, so recording them never delays a turn:
// a turn's summary is one list append (one store round trip: Keep is the
// NATS KV list bound, so nothing is trimmed). A summary is written only
// while the writer still owns the agent (the owns function Record is
// handed, the driver's lease fence).
//
// # Not guaranteed
//
// A summary or dead-letter record that cannot be written (the store is
// down, the worker is killed before Flush) is logged and lost: the turn
// and the message are not affected, only their record. Records appear
// shortly after the turn ends, not at once. Each agent has at most
// MaxPending writes waiting; beyond that the oldest is dropped and
// logged.
package turnlog
