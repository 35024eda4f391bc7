// Package memstore is an in-process store.Store for unit tests and
// `store.url: memory://`. The embedded default keeps its state in
// JetStream KV (store/natskv), not here. Nothing this store holds
// survives the process: a restart forgets spend, halts and pauses. It
// must not be used where state must outlive the process.
package memstore

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/store"
)

// Store is a store.Store held in memory. Expiry is measured on its clock.
type Store struct {
	clock  clock.Clock
	mu     sync.Mutex
	rev    uint64
	keys   map[string]item
	lists  map[string][][]byte
	closed bool
}

type item struct {
	value   []byte
	rev     uint64
	expires time.Time // zero: never
}

var _ store.Store = (*Store)(nil)

// New returns an empty store that reads expiry time from c (clock.Real()
// when nil).
func New(c clock.Clock) *Store {
	if c == nil {
		c = clock.Real()
	}
	return &Store{clock: c, keys: map[string]item{}, lists: map[string][][]byte{}}
}

// live returns the key's item if present and unexpired. Callers hold mu.
func (s *Store) live(key string) (item, bool) {
	it, ok := s.keys[key]
	if !ok {
		return item{}, false
	}
	if !it.expires.IsZero() && !s.clock.Now().Before(it.expires) {
		delete(s.keys, key)
		return item{}, false
	}
	return it, true
}

// enter takes mu for a call, unless the call must not run: it returns
// ctx's error, or store.ErrClosed after Close, without holding mu. On nil
// the caller holds mu and releases it.
func (s *Store) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return store.ErrClosed
	}
	return nil
}

func (s *Store) write(key string, value []byte, ttl time.Duration) uint64 {
	s.rev++
	it := item{value: slices.Clone(value), rev: s.rev}
	if ttl > 0 {
		it.expires = s.clock.Now().Add(ttl)
	}
	s.keys[key] = it
	return s.rev
}

func (s *Store) Get(ctx context.Context, key string) (store.Entry, error) {
	if err := s.enter(ctx); err != nil {
		return store.Entry{}, err
	}
	defer s.mu.Unlock()
	it, ok := s.live(key)
	if !ok {
		return store.Entry{}, store.ErrNotFound
	}
	return store.Entry{Value: slices.Clone(it.value), Revision: it.rev}, nil
}

func (s *Store) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	return s.Fenced(store.Fence{}).Put(ctx, key, value)
}

func (s *Store) Create(ctx context.Context, key string, value []byte, ttl time.Duration) (uint64, error) {
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	if _, ok := s.live(key); ok {
		return 0, store.ErrExists
	}
	return s.write(key, value, ttl), nil
}

func (s *Store) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	it, ok := s.live(key)
	if !ok {
		return 0, store.ErrNotFound
	}
	if it.rev != revision {
		return 0, store.ErrConflict
	}
	// The updated value never expires (store.Store.Update): the ttl
	// Create gave the key is dropped, as NATS KV and Redis do.
	return s.write(key, value, 0), nil
}

func (s *Store) Delete(ctx context.Context, key string) error {
	return s.Fenced(store.Fence{}).Delete(ctx, key)
}

func (s *Store) Append(ctx context.Context, list string, value []byte, keep int) error {
	return s.Fenced(store.Fence{}).Append(ctx, list, value, keep)
}

// Fenced returns the writes under f: each checks f under the store's one
// lock, so it is atomic with the write. The zero fence checks nothing.
func (s *Store) Fenced(f store.Fence) store.Writer { return fenced{s: s, f: f} }

// Claim checks that f still holds: the memory store keeps everything
// where a fenced write checks f directly, so there is nothing to mirror.
func (s *Store) Claim(ctx context.Context, f store.Fence) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	return s.holds(f)
}

// holds returns nil if f holds (or is zero), else store.ErrFenced.
// Callers hold mu.
func (s *Store) holds(f store.Fence) error {
	if f.IsZero() {
		return nil
	}
	if it, ok := s.live(f.Key); !ok || it.rev != f.Revision {
		return store.ErrFenced
	}
	return nil
}

// fenced is the memory store's writes under a fence.
type fenced struct {
	s *Store
	f store.Fence
}

// enter is Store.enter, then the fence's check.
func (w fenced) enter(ctx context.Context) error {
	if err := w.s.enter(ctx); err != nil {
		return err
	}
	if err := w.s.holds(w.f); err != nil {
		w.s.mu.Unlock()
		return err
	}
	return nil
}

func (w fenced) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	if err := w.enter(ctx); err != nil {
		return 0, err
	}
	defer w.s.mu.Unlock()
	return w.s.write(key, value, 0), nil
}

func (w fenced) Delete(ctx context.Context, key string) error {
	if err := w.enter(ctx); err != nil {
		return err
	}
	defer w.s.mu.Unlock()
	delete(w.s.keys, key)
	return nil
}

func (w fenced) Append(ctx context.Context, list string, value []byte, keep int) error {
	if err := w.enter(ctx); err != nil {
		return err
	}
	defer w.s.mu.Unlock()
	l := append(w.s.lists[list], slices.Clone(value))
	if keep > 0 && len(l) > keep {
		l = slices.Clone(l[len(l)-keep:])
	}
	w.s.lists[list] = l
	return nil
}

func (s *Store) Tail(ctx context.Context, list string, n int) ([][]byte, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	l := s.lists[list]
	if n > 0 && len(l) > n {
		l = l[len(l)-n:]
	}
	out := make([][]byte, len(l))
	for i, v := range l {
		out[i] = slices.Clone(v)
	}
	return out, nil
}

// Close makes every later call return store.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}
