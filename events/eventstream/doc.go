// Package eventstream keeps the agents' events in a JetStream stream, so
// that they outlive the process that published them and every replica can
// read every agent's: Stream.Record stores the events of this replica's
// bus, Stream.Follow reads them back — history from an id, then live — for
// the API's Server-Sent Events. It must not decide what an event means,
// nor count events for the metrics (those come from each replica's own
// bus, so nothing is counted twice).
//
// # The stream
//
// One limits-based stream, <nats.stream>_EVENTS by default, over
// <prefix>.*.events.> (the contract's event subjects, which the input
// stream's subjects never overlap). An event is a JSON events.Event on
// <prefix>.<agent>.events.<type>, without seq and with the publishing
// replica's name. It stays until it is older than events.max_age or the
// stream holds more than events.max_bytes, whichever comes first; the
// oldest go first, read or not. The stream keeps nats.replicas copies.
//
// # Ids
//
// An event's id (events.Event.Seq, the SSE id) is its stream sequence
// number: it grows with every stored event, is the same on every replica,
// and survives restarts of the worker and of NATS (as long as the stream
// is not deleted). A client that resumes from an id the stream no longer
// holds gets an events.Gap first.
//
// # Guarantees and non-guarantees
//
//   - Storing never blocks or slows a turn: Record takes events from the
//     bus into a bounded buffer and publishes them asynchronously.
//   - One replica's events are stored in the order its bus published
//     them. Events of different replicas interleave in the order the
//     stream received them; around a hand-over, the last events of an
//     agent's old owner may follow the first of its new owner.
//   - Storing is best effort: an event that finds the buffer full, that
//     cannot be encoded, or whose publish JetStream does not acknowledge
//     (NATS down, the stream gone, no ack within the timeout) is not
//     stored and not retried (a retry would reorder) — it is counted
//     (Unstored; agent_worker_events_dropped_total{reason="stream_overflow"
//     or "stream_failed"}) and logged. An event counted as failed may
//     still have been stored when only its acknowledgement was lost.
//   - The events stay on this replica's bus whatever happens to the
//     stream: the metrics count them there.
package eventstream
