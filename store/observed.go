package store

import (
	"context"
	"errors"
	"time"
)

// Store operations, as Observed names them.
const (
	OpGet    = "get"
	OpPut    = "put"
	OpCreate = "create"
	OpUpdate = "update"
	OpDelete = "delete"
	OpAppend = "append"
	OpTail   = "tail"
	OpClaim  = "claim"
)

// Outcomes of a store operation, as Observed names them: ok, refused (the
// store answered, and the answer was ErrNotFound, ErrExists, ErrConflict
// or ErrFenced: a normal answer to a conditional operation), error (the
// store failed, or the caller gave up).
const (
	OutcomeOK      = "ok"
	OutcomeRefused = "refused"
	OutcomeError   = "error"
)

// Outcome names err as an outcome of a store operation.
func Outcome(err error) string {
	switch {
	case err == nil:
		return OutcomeOK
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrExists), errors.Is(err, ErrConflict), errors.Is(err, ErrFenced):
		return OutcomeRefused
	}
	return OutcomeError
}

// Observed returns st with every operation told to observe once it
// returned: its name (OpGet, ...) and its error. It is for counting round
// trips (agent_worker_store_operations_total); observe must not block.
func Observed(st Store, observe func(op string, err error)) Store {
	return &observed{st: st, observe: observe}
}

type observed struct {
	st      Store
	observe func(op string, err error)
}

func (o *observed) Get(ctx context.Context, key string) (Entry, error) {
	e, err := o.st.Get(ctx, key)
	o.observe(OpGet, err)
	return e, err
}

func (o *observed) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	rev, err := o.st.Put(ctx, key, value)
	o.observe(OpPut, err)
	return rev, err
}

func (o *observed) Create(ctx context.Context, key string, value []byte, ttl time.Duration) (uint64, error) {
	rev, err := o.st.Create(ctx, key, value, ttl)
	o.observe(OpCreate, err)
	return rev, err
}

func (o *observed) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	rev, err := o.st.Update(ctx, key, value, revision)
	o.observe(OpUpdate, err)
	return rev, err
}

func (o *observed) Delete(ctx context.Context, key string) error {
	err := o.st.Delete(ctx, key)
	o.observe(OpDelete, err)
	return err
}

func (o *observed) Append(ctx context.Context, list string, value []byte, keep int) error {
	err := o.st.Append(ctx, list, value, keep)
	o.observe(OpAppend, err)
	return err
}

func (o *observed) Tail(ctx context.Context, list string, n int) ([][]byte, error) {
	items, err := o.st.Tail(ctx, list, n)
	o.observe(OpTail, err)
	return items, err
}

// Fenced returns the observed writes under f, counted as the plain ones.
func (o *observed) Fenced(f Fence) Writer {
	return &observedWriter{w: o.st.Fenced(f), observe: o.observe}
}

func (o *observed) Claim(ctx context.Context, f Fence) error {
	err := o.st.Claim(ctx, f)
	o.observe(OpClaim, err)
	return err
}

// observedWriter is an observed store's writes under a fence.
type observedWriter struct {
	w       Writer
	observe func(op string, err error)
}

func (o *observedWriter) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	rev, err := o.w.Put(ctx, key, value)
	o.observe(OpPut, err)
	return rev, err
}

func (o *observedWriter) Delete(ctx context.Context, key string) error {
	err := o.w.Delete(ctx, key)
	o.observe(OpDelete, err)
	return err
}

func (o *observedWriter) Append(ctx context.Context, list string, value []byte, keep int) error {
	err := o.w.Append(ctx, list, value, keep)
	o.observe(OpAppend, err)
	return err
}

// Close closes the observed store; it is not an operation counted.
func (o *observed) Close() error { return o.st.Close() }
