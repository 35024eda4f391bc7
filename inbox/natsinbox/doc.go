// Package natsinbox binds agents' inboxes to NATS: it consumes each
// agent's subjects from JetStream (or, in core mode, plain
// subscriptions), turns bodies into inbox messages, dead-letters what it
// cannot use, and acks a message only when the turn that drained it has
// been recorded.
//
// # Guarantees (JetStream mode)
//
//   - At least once: a message is acked only after the driver reports it
//     handled (its turn finished and was stored). Until then its ack
//     deadline is kept alive with in-progress acks, however long the agent
//     sleeps, is paused or halted, or the turn runs.
//   - No double work: a handled message's id (Nats-Msg-Id, else the
//     envelope's id, else the stream sequence, "<stream>-seq-<n>"; a
//     Nats-Msg-Id natsbus.MsgID(agent, envelope's id) is the envelope's id,
//     so ids are per agent though JetStream's are stream-wide) is
//     recorded in the agent's handled-id record before the ack, with the
//     number of the turn that handled it when the driver says (HandledBy;
//     turnlog.RecordHandled: one bounded key per agent, one write per
//     settled batch); a redelivery or republish of it is acked without a
//     turn while the record holds it (Options.HandledKeep newest ids,
//     within Options.HandledTTL). HandledID
//     asks the same question, so a publisher (the API) can answer
//     "duplicate" instead of queueing what would be dropped.
//   - Backpressure, not loss: the server delivers at most inbox.cap
//     unacked messages per agent; the rest wait in the stream.
//   - Bad input never blocks the loop: it is published to the dead-letter
//     subject with an Agent-Worker-Reject-Reason header, terminated (not
//     redelivered), logged and announced as a message-rejected event.
//     For a configured agent the reason is also recorded in the store
//     under the message's id (turnlog.DeadLetter, kept HandledTTL,
//     written in the background), and so is a dropped message's; Stop
//     waits a few seconds for those records.
//
// In core NATS mode none of this holds: delivery is at most once.
//
// A message's Agent-Worker-Via header (HeaderVia), set by the API for the
// Alertmanager receiver and by package background on a subagent's report,
// becomes inbox.Message.Via — the agent wakes with source "alertmanager"
// or "subagent" — only when the message carries the deployment's seal
// over it (package seal). A NATS publisher can set the header but not the
// seal: its claim is ignored, logged and counted
// (agent_worker_messages_unsealed_total), and the message is delivered as
// any other.
//
// It must not run turns: it hands messages to a Target (the driver's
// agent) and learns their fate through inbox.Receipt.
package natsinbox
