// Package natsinbox is the agents' input on NATS. With JetStream the
// input stream is a log: messages stay in it until handled, each agent
// keeps a cursor per bound input (the last stream sequence a recorded turn
// handled, stored in the turn's own record by package driver), and each
// replica runs one router instead of consumers per agent. In core NATS
// mode it subscribes, at most once.
//
// One idea per file: the router (router.go) wakes the owner of each new
// message; the window (window.go) keeps the messages routed to the agents
// served here for their next read; the reader (reader.go) reads an
// agent's input from its cursors, from the window or with batch direct
// gets; the purger (purger.go) removes what the stored
// cursors cover; dead letters are published (reject.go), kept, read and
// replayed (deadletters.go); input for unknown agents is dead-lettered
// once (unknown.go); the start misses nothing (start.go); a stream of
// the older consumer layout is converted in place (upgrade.go).
//
// # Guarantees (JetStream mode)
//
//   - At least once: a message leaves the log only once the stored
//     cursors of every configured agent that binds its subject are at or
//     past it (handled by a recorded turn, or dead-lettered).
//   - No double work: a message is handled exactly when it is at or below
//     the agent's cursor, and the cursor is stored in the same write as
//     the turn that handled it. Publisher retries are deduplicated by the
//     stream's Nats-Msg-Id window.
//   - Ownership moves by cursor: a new owner reads on from the stored
//     cursors as soon as it holds the lease; nothing waits for an ack
//     deadline.
//   - Cost per message does not grow with the number of agents: one
//     router per replica sees each message once; an agent with no news
//     costs nothing; its backlog stays in the log, read at most its inbox
//     cap at a time.
//   - Bad input never blocks the loop: a body the worker cannot use is
//     published to the dead-letter subject with an
//     Agent-Worker-Reject-Reason header, logged, announced as a
//     message-rejected event and recorded in the store under the
//     message's id (turnlog.DeadLetter); the cursor then passes it.
//
// Not guaranteed: on a clustered stream a direct get may be answered by a
// copy that lags; the reader reads again until it has what the router saw
// (the start's hints cannot be checked so). A crash between a dead letter
// and the store of the cursor that passes it dead-letters the message
// again (kept once within the dead-letter stream's duplicate window) or,
// if it was given up after failed turns, lets it run again.
//
// A message's Agent-Worker-Via header (HeaderVia), set by the API for the
// Alertmanager receiver and by package background on a subagent's report,
// becomes inbox.Message.Via — the agent wakes with source "alertmanager"
// or "subagent" — only when the message carries the deployment's seal
// over it (package seal). A NATS publisher can set the header but not the
// seal: its claim is ignored, logged and counted
// (agent_worker_messages_unsealed_total), and the message is delivered as
// any other. The same holds for its Agent-Worker-Sender header
// (HeaderSender), the sender the API authenticated ("api, token ops"):
// sealed, it becomes inbox.Message.Sender, shown to the model outside the
// fence; forged, it is ignored, logged and counted alike, and the message
// shows "via nats".
//
// It must not run turns: it wakes the driver's agents (Target) and
// answers their reads (Binding.Read, driver.Log).
package natsinbox
