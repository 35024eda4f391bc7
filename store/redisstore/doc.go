// Package redisstore is the store.Store over Redis (a single server,
// Sentinel or Cluster, through go-redis' UniversalClient), for deployments
// that keep agent-worker's state in a Redis they already run. Open's doc
// lists the URLs it takes.
//
// It must not leak go-redis types through the store interface: callers see
// store.Entry, revisions as uint64 and the store sentinel errors. (Other
// errors wrap the go-redis error for its message; callers must not match
// on it.)
//
// # What maps to what
//
// Every Redis key starts with Options.Prefix (default "agent-worker:"):
//
//   - A key is a hash at <prefix>k:<key> with fields v (the value),
//     r (the revision, in decimal) and w (the last write's token, below).
//     Get is one HMGET; Put, Create and Update are Lua scripts, so each
//     check-and-write is one atomic step on the server, for any number of
//     processes.
//   - Revisions are max(previous revision + 1, the server's clock in
//     microseconds) at each write. They increase with every write while
//     the key exists. After a Delete or an expiry nothing of the key is
//     left, and the next revision comes from the clock: larger than any the
//     key had before, so a stale Update is a conflict and never lands on a
//     lease someone else now holds, unless the server's clock stepped back
//     in between (an NTP step, or a failover to a replica whose clock is
//     behind) by more than the time since the delete. No counter outlives
//     its key, so claim keys (one per schedule tick, one per handled
//     message) leave nothing behind when they expire.
//   - Create's ttl is PEXPIRE, in milliseconds (rounded up). Redis expires
//     a key on access, to the millisecond, on the server's clock: from that
//     moment Get reports store.ErrNotFound and Create succeeds. Put and
//     Update remove the ttl (PERSIST).
//   - A list is a Redis list at <prefix>l:{<list>}; Append is RPUSH and
//     LTRIM in one script, so the server never holds more than keep items,
//     and Tail is LRANGE. Lists have no size cap beyond Redis' own.
//   - Each write call carries a random token, stored with what it wrote
//     (the hash's w, and <prefix>l:{<list>}:w for lists). go-redis sends a
//     command again when its reply was lost (a dropped connection, a
//     failover); a script that finds its own token returns what the first
//     attempt did instead of writing twice. So a Create that won is not
//     reported as lost, and an Append does not add its item twice.
//   - Scripts touch the keys of one Cluster hash slot only: a single key,
//     or a list and its token key, which share the {hash tag}.
//
// # What Redis must be configured for
//
// The state is spend, halts and pauses: losing it lets a halted agent run
// again. So the server should persist (appendonly yes; appendfsync
// everysec loses at most about a second of writes in a crash) and must not
// evict: maxmemory-policy noeviction (the default). A volatile-* policy
// evicts claims and leases, allkeys-* anything. Open logs a warning when
// the server reports another policy. Redis replication is asynchronous: a
// failover (Sentinel, Cluster) can lose writes the old master had
// acknowledged.
package redisstore
