package store

import (
	"context"
	"errors"
	"fmt"
)

// Fence is a fencing token: a lease's key and the revision the lease's
// holder took it at. A write made under a fence lands only while the
// key still has that revision, checked by the store in the same atomic
// step as the write, so a holder that was frozen or cut off while the
// lease moved can write nothing once it wakes, whatever it believes.
// The zero Fence fences nothing (Writer writes plainly).
type Fence struct {
	Key      string
	Revision uint64
}

// IsZero reports whether f fences nothing.
func (f Fence) IsZero() bool { return f.Key == "" && f.Revision == 0 }

// String renders f for logs: "lease.a1@42".
func (f Fence) String() string { return fmt.Sprintf("%s@%d", f.Key, f.Revision) }

// ErrFenced is a write under a fence that found the fence's key at
// another revision (the lease changed hands, was let go, or was taken
// back since): nothing was written.
var ErrFenced = errors.New("store: fenced: the lease this write was made under has moved")

// Writer is the writes an owner makes of its own state: a Store writes
// plainly, Fenced(f) under a fence. Each write under a fence lands only
// while the fence holds and fails with ErrFenced, writing nothing,
// otherwise.
type Writer interface {
	// Put is Store.Put.
	Put(ctx context.Context, key string, value []byte) (uint64, error)
	// Delete is Store.Delete (a missing key is not an error, but a
	// fence that moved is).
	Delete(ctx context.Context, key string) error
	// Append is Store.Append.
	Append(ctx context.Context, list string, value []byte, keep int) error
}

// Under returns st's writes under f: st itself for the zero fence.
func Under(st Store, f Fence) Writer {
	if f.IsZero() {
		return st
	}
	return st.Fenced(f)
}
