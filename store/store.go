// Package store is the durable state behind agent-worker: spend, halts,
// pauses, requested wake times, schedule claims, leases and conversation
// history, behind one small interface. Implementations live in
// sub-packages — natskv (JetStream KV, the default), redisstore, and
// memstore (unit tests) — and must not leak their client types through it.
package store

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors every implementation returns, for errors.Is.
var (
	// ErrNotFound: the key does not exist (or has expired).
	ErrNotFound = errors.New("store: key not found")
	// ErrExists: Create found the key already present.
	ErrExists = errors.New("store: key exists")
	// ErrConflict: Update's expected revision is not the current one.
	ErrConflict = errors.New("store: revision conflict")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store: closed")
	// ErrUnreachable: opening the store found no server to answer (a
	// refused or timed-out connection), as opposed to one that refused
	// the configuration (a wrong password, a bad URL).
	ErrUnreachable = errors.New("store unreachable")
)

// Entry is a stored value and its revision.
type Entry struct {
	Value []byte
	// Revision increases with every write to the key; Update compares it.
	Revision uint64
}

// Store is key/value state with atomic claims and bounded lists.
//
// Keys are dot-separated tokens of [A-Za-z0-9_-] (for example
// "agent.oncall.halt"), so every backend can hold them unescaped.
// Every method is safe for concurrent use.
type Store interface {
	// Get returns the key's entry, or ErrNotFound.
	Get(ctx context.Context, key string) (Entry, error)
	// Put writes the value unconditionally and returns its revision.
	Put(ctx context.Context, key string, value []byte) (uint64, error)
	// Create writes the value only if the key is absent (set-if-absent),
	// returning ErrExists otherwise. A ttl > 0 makes the key expire; after
	// that Create succeeds again. This is the claim primitive: exactly one
	// of several concurrent Creates of a key succeeds.
	Create(ctx context.Context, key string, value []byte, ttl time.Duration) (uint64, error)
	// Update writes the value only if the key's revision is still
	// revision (compare-and-set), returning ErrConflict otherwise and
	// ErrNotFound if the key is gone.
	//
	// The value Update writes never expires: a ttl given to Create is
	// dropped, not carried over, in every backend (NATS KV writes a new
	// message without a TTL; Redis SET without KEEPTTL).
	Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error)
	// Delete removes the key; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error

	// Append adds value to the end of the named list and trims it to its
	// newest keep items (keep <= 0 keeps everything).
	Append(ctx context.Context, list string, value []byte, keep int) error
	// Tail returns the newest n items of the list, oldest first
	// (n <= 0 returns all). A missing list is empty, not an error.
	Tail(ctx context.Context, list string, n int) ([][]byte, error)

	// Fenced returns this store's writes under f (see Fence): each lands
	// only while f.Key's revision is still f.Revision, checked by the
	// server in the same atomic step as the write, and otherwise fails
	// with ErrFenced, writing nothing. A lease's holder writes its
	// agent's state through it, so a holder that froze while the lease
	// moved writes nothing once it wakes.
	Fenced(f Fence) Writer
	// Claim makes f the newest fence of f.Key everywhere the store keeps
	// state: once it returns nil, no write under an older fence of f.Key
	// lands, in any bucket or list. (A write under f.Key's own key and
	// revision is checked directly; a backend that keeps some state
	// where that key cannot be checked in the same step mirrors f there.)
	// A lease's new holder claims the fence it took before it reads the
	// agent's state, so nothing its predecessor writes afterwards can
	// slip under what it read. Claiming a fence older than one claimed
	// already is ErrFenced (a backend may refuse any fence that does not
	// hold, too); claiming the newest again is not an error.
	Claim(ctx context.Context, f Fence) error

	// Close releases the store's resources. The store is unusable after.
	Close() error
}
