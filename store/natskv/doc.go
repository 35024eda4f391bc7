// Package natskv is the durable store.Store over JetStream key/value
// buckets: keys live in the bucket <Bucket>-state and bounded lists in
// <Bucket>-lists, on a NATS connection the caller owns. It survives what the
// JetStream server survives (a restart of the worker, and with file storage
// a restart of the server), so spend, halts and pauses outlive the pod.
// On a JetStream cluster with Options.Replicas 3 it also survives losing
// any one of the three servers: acknowledged writes are on a majority of
// the copies, and the rest keep serving (see Options.Replicas).
//
// It must not leak NATS types through the store interface: callers see
// store.Entry, revisions as uint64 and the store sentinel errors, never a
// jetstream.KeyValueEntry. (Errors other than the sentinels wrap the NATS
// error for its message; callers must not match on it.)
//
// # What maps to what
//
//   - Revisions are JetStream stream sequences: they increase with every
//     write to the bucket, so they also increase per key.
//   - Create's ttl is a per-message TTL (the Nats-TTL header). The server
//     counts whole seconds, so a ttl is rounded up to the next second (at
//     least one): a claim never lapses before the ttl it was given. The
//     server removes an expired key on its own timer: within milliseconds
//     on an idle server, later when it is busy (the timer fires at most
//     every 250ms). Until then Get still returns the key and Create still
//     reports store.ErrExists. Expiry is measured on the server's clock,
//     from the write's timestamp, and keeps counting while the server is
//     down: a key that expired during a restart is gone when it is back.
//   - Delete is a KV purge whose marker itself expires after a minute, so
//     deleted keys leave nothing behind in the bucket.
//   - A write under a fence (Store.Fenced) is one message carrying the
//     check: the server stores it only while the fence key's last
//     sequence is the fence's revision
//     (Nats-Expected-Last-Subject-Sequence with its -Subject header,
//     nats-server 2.11 or later). The lists bucket is another stream, so
//     Claim mirrors the fence there, under the fence key's name, and list
//     appends check the mirror (fence.go).
//   - Values travel as single NATS messages, so a value (plus a few dozen
//     bytes of headers) must fit in the server's max_payload: 1 MiB by
//     default (the server warns when it is set above 8 MiB). A larger
//     value fails with an error that names both sizes. A list holds up to
//     MaxListItems such values.
//
// # Permissions
//
// The connection's user needs the KV subjects of both buckets ($KV.<bucket>.>)
// and the JetStream API for stream create/update/info, message get,
// consumer create (Tail) and stream purge (Append's trim).
package natskv
