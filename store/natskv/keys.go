package natskv

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/store"
)

// Get returns the key's value and revision, or store.ErrNotFound for a key
// never written, deleted, or expired and removed by the server (see the
// package doc for how late that can be).
func (s *Store) Get(ctx context.Context, key string) (store.Entry, error) {
	const op = "get"
	if err := s.begin(ctx, op, key); err != nil {
		return store.Entry{}, err
	}
	e, err := s.state.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return store.Entry{}, store.ErrNotFound
	}
	if err != nil {
		return store.Entry{}, wrap(ctx, op, key, err)
	}
	return store.Entry{Value: e.Value(), Revision: e.Revision()}, nil
}

// Put writes the value unconditionally; it never expires, whatever ttl the
// key was created with. The write is durable once Put returns (as durable
// as the bucket's storage and replicas).
func (s *Store) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	const op = "put"
	if err := s.begin(ctx, op, key); err != nil {
		return 0, err
	}
	rev, err := s.state.Put(ctx, key, value)
	if err != nil {
		return 0, s.wrapWrite(ctx, op, key, value, err)
	}
	return rev, nil
}

// Create writes the value only if the key holds nothing (never written,
// deleted, or expired), atomically on the server: of several concurrent
// Creates, from any number of processes, exactly one succeeds and the
// others get store.ErrExists.
//
// A ttl > 0 is rounded up to whole seconds (the server's unit, at least
// one) and makes the key expire that long after the write, on the
// server's clock, removed by the server's expiry timer (package doc).
// A ttl <= 0 never expires.
func (s *Store) Create(ctx context.Context, key string, value []byte, ttl time.Duration) (uint64, error) {
	const op = "create"
	if err := s.begin(ctx, op, key); err != nil {
		return 0, err
	}
	var opts []jetstream.KVCreateOpt
	if ttl > 0 {
		opts = append(opts, jetstream.KeyTTL(wholeSeconds(ttl)))
	}
	rev, err := s.state.Create(ctx, key, value, opts...)
	if err != nil {
		if wrongLastSequence(err) {
			return 0, store.ErrExists
		}
		return 0, s.wrapWrite(ctx, op, key, value, err)
	}
	return rev, nil
}

// wholeSeconds rounds ttl up to the server's unit: NATS message TTLs are
// whole seconds, a fraction is truncated and less than one is refused.
func wholeSeconds(ttl time.Duration) time.Duration {
	return max(time.Second, (ttl + time.Second - 1).Truncate(time.Second))
}

// Update writes the value only if revision is still the key's current
// one, returning store.ErrConflict otherwise and store.ErrNotFound if the
// key holds nothing. The value written never expires: a ttl given to
// Create is dropped.
func (s *Store) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	const op = "update"
	if err := s.begin(ctx, op, key); err != nil {
		return 0, err
	}
	// To JetStream, expected revision 0 means "the key holds nothing": an
	// Update with it would create the key. No written value has revision
	// 0, so it can only be a conflict or a missing key.
	if revision != 0 {
		rev, err := s.state.Update(ctx, key, value, revision)
		if err == nil {
			return rev, nil
		}
		if !wrongLastSequence(err) {
			return 0, s.wrapWrite(ctx, op, key, value, err)
		}
	}
	// The revision did not match: a conflict, unless the key is gone.
	switch _, err := s.state.Get(ctx, key); {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return 0, store.ErrNotFound
	case err != nil:
		return 0, wrap(ctx, op, key, err)
	}
	return 0, store.ErrConflict
}

// Delete removes the key; deleting a missing key is not an error. The
// removal leaves a purge marker that the server drops after a minute, so
// Create succeeds at once and deleted keys do not accumulate.
func (s *Store) Delete(ctx context.Context, key string) error {
	const op = "delete"
	if err := s.begin(ctx, op, key); err != nil {
		return err
	}
	if err := s.state.Purge(ctx, key, jetstream.PurgeTTL(markerTTL)); err != nil {
		return wrap(ctx, op, key, err)
	}
	return nil
}
