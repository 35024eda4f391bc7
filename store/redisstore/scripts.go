package redisstore

import "github.com/redis/go-redis/v9"

// The writes are Lua scripts so that each is one atomic step on the
// server. Each touches keys of one hash slot only (one key, or a list and
// its token key, which share a {hash tag}), so they run on Redis Cluster.
//
// A key is a hash: v (the value), r (its revision, in decimal) and w (the
// token of the write that wrote it). Every write call carries a fresh
// random token, and a script that finds its own token already there
// returns what that write returned instead of writing again: go-redis
// re-sends a command whose reply was lost (a dropped connection, a
// failover), and a Create that won must not then report store.ErrExists,
// nor an Append add its item twice.
//
// Revisions are max(previous + 1, server time in microseconds). The
// previous revision keeps them increasing while the key exists; the clock
// makes them keep increasing across a Delete or an expiry, when nothing of
// the key is left to count from, without keeping a counter per key forever
// (claim keys are one per schedule tick and per handled message). That
// holds while the server's clock does not step back (see the package doc).
// Server time is about 1.8e15 µs today: Lua's doubles hold integers exactly
// up to 2^53 (about 9e15), until the year 2255.

// nextRev is the revision function every writing script starts with.
const nextRev = `
local function nextrev(cur)
  local t = redis.call('TIME')
  local rev = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if cur then
    local c = tonumber(cur)
    if c and c >= rev then rev = c + 1 end
  end
  return string.format('%.0f', rev)
end
`

// fenceHolds is the check every fenced script makes before it writes:
// the fence key (a hash like any key) still has the fence's revision.
// Unfenced calls pass no fence key. Revisions compare as strings (see
// updateScript).
const fenceHolds = `
local function fenceholds(k, rev)
  if not k then return true end
  return redis.call('HGET', k, 'r') == rev
end
`

// putScript: KEYS[1] the key, KEYS[2] the fence key (optional); ARGV
// value, token, the fence's revision (with a fence key). Returns
// {'ok', rev} or {'fenced'}. A write whose token is in already returns
// what it did, fence or not: it landed while the fence held.
var putScript = redis.NewScript(nextRev + fenceHolds + `
local cur = redis.call('HMGET', KEYS[1], 'r', 'w')
if cur[1] and cur[2] == ARGV[2] then return {'ok', cur[1]} end
if not fenceholds(KEYS[2], ARGV[3]) then return {'fenced'} end
local rev = nextrev(cur[1])
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'r', rev, 'w', ARGV[2])
redis.call('PERSIST', KEYS[1])
return {'ok', rev}
`)

// createScript: KEYS[1] the key; ARGV value, ttl in ms ("0": none),
// token. Returns {'ok', rev} or {'exists'}. A key past its expiry is
// absent to Redis (it expires keys on access), so it is created again.
var createScript = redis.NewScript(nextRev + `
local cur = redis.call('HMGET', KEYS[1], 'r', 'w')
if cur[1] then
  if cur[2] == ARGV[3] then return {'ok', cur[1]} end
  return {'exists'}
end
local rev = nextrev(false)
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'r', rev, 'w', ARGV[3])
if ARGV[2] ~= '0' then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return {'ok', rev}
`)

// updateScript: KEYS[1] the key; ARGV value, expected revision (decimal),
// token. Returns {'ok', rev}, {'conflict'} or {'notfound'}. Revisions
// compare as strings: both sides are canonical decimals, and a string
// compare cannot round a client's out-of-range number onto a real one.
// PERSIST drops a ttl Create gave the key (store.Store.Update).
var updateScript = redis.NewScript(nextRev + `
local cur = redis.call('HMGET', KEYS[1], 'r', 'w')
if not cur[1] then return {'notfound'} end
if cur[2] == ARGV[3] then return {'ok', cur[1]} end
if cur[1] ~= ARGV[2] then return {'conflict'} end
local rev = nextrev(cur[1])
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'r', rev, 'w', ARGV[3])
redis.call('PERSIST', KEYS[1])
return {'ok', rev}
`)

// appendScript: KEYS[1] the list, KEYS[2] its token key (same hash slot),
// KEYS[3] the fence key (optional); ARGV value, LTRIM start (-keep, or
// "0": keep all), token, the fence's revision (with a fence key). Returns
// 1, 0 when this token's item is already in, or -1 when the fence moved.
var appendScript = redis.NewScript(fenceHolds + `
if redis.call('GET', KEYS[2]) == ARGV[3] then return 0 end
if not fenceholds(KEYS[3], ARGV[4]) then return -1 end
redis.call('RPUSH', KEYS[1], ARGV[1])
if ARGV[2] ~= '0' then redis.call('LTRIM', KEYS[1], ARGV[2], -1) end
redis.call('SET', KEYS[2], ARGV[3])
return 1
`)

// deleteScript: KEYS[1] the key, KEYS[2] the fence key; ARGV the fence's
// revision. Returns 1, or -1 when the fence moved. (An unfenced Delete is
// a plain DEL.)
var deleteScript = redis.NewScript(fenceHolds + `
if not fenceholds(KEYS[2], ARGV[1]) then return -1 end
redis.call('DEL', KEYS[1])
return 1
`)
