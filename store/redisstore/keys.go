package redisstore

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agent-worker/agent-worker/store"
)

// Get returns the key's value and revision, or store.ErrNotFound for a key
// never written, deleted, or past its ttl (Redis expires keys on access, to
// the millisecond on the server's clock).
func (s *Store) Get(ctx context.Context, key string) (store.Entry, error) {
	const op = "get"
	if err := s.begin(ctx, op, key); err != nil {
		return store.Entry{}, err
	}
	vals, err := s.client.HMGet(ctx, s.stateKey(key), "v", "r").Result()
	if err != nil {
		return store.Entry{}, s.wrap(ctx, op, key, err)
	}
	v, vok := vals[0].(string)
	r, rok := vals[1].(string)
	if !vok || !rok {
		return store.Entry{}, store.ErrNotFound
	}
	rev, err := strconv.ParseUint(r, 10, 64)
	if err != nil {
		return store.Entry{}, s.wrap(ctx, op, key, fmt.Errorf("stored revision %q: %w", r, err))
	}
	return store.Entry{Value: []byte(v), Revision: rev}, nil
}

// Put writes the value unconditionally and returns its revision; the key
// never expires after, whatever ttl Create gave it. The write is as
// durable as the server's persistence (AOF/RDB) and replication make it.
func (s *Store) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	return s.put(ctx, key, value, rand.Text())
}

func (s *Store) put(ctx context.Context, key string, value []byte, token string) (uint64, error) {
	return s.putUnder(ctx, store.Fence{}, key, value, token)
}

// putUnder is put under f (the zero fence: none).
func (s *Store) putUnder(ctx context.Context, f store.Fence, key string, value []byte, token string) (uint64, error) {
	const op = "put"
	if err := s.begin(ctx, op, key); err != nil {
		return 0, err
	}
	keys, args, err := s.fence(ctx, f, []string{s.stateKey(key)}, value, token)
	if err != nil {
		return 0, s.wrap(ctx, op, key, err)
	}
	rev, status, err := s.runKeys(ctx, putScript, keys, args...)
	switch {
	case err != nil:
		return 0, s.wrap(ctx, op, key, err)
	case status == "fenced":
		return 0, s.wrap(ctx, op, key, store.ErrFenced)
	case status != "ok":
		return 0, s.wrap(ctx, op, key, unexpected(status))
	}
	return rev, nil
}

// Create writes the value only if the key holds nothing (never written,
// deleted, or past its ttl), atomically on the server: of several
// concurrent Creates, from any number of processes, exactly one succeeds
// and the others get store.ErrExists.
//
// A ttl > 0 makes the key expire that long after the write, on the
// server's clock, rounded up to whole milliseconds (Redis' unit). From
// that moment Get reports store.ErrNotFound and Create succeeds again. A
// ttl <= 0 never expires.
func (s *Store) Create(ctx context.Context, key string, value []byte, ttl time.Duration) (uint64, error) {
	return s.create(ctx, key, value, ttl, rand.Text())
}

func (s *Store) create(ctx context.Context, key string, value []byte, ttl time.Duration, token string) (uint64, error) {
	const op = "create"
	if err := s.begin(ctx, op, key); err != nil {
		return 0, err
	}
	ms := "0"
	if ttl > 0 {
		ms = strconv.FormatInt(int64((ttl+time.Millisecond-1)/time.Millisecond), 10)
	}
	rev, status, err := s.run(ctx, createScript, key, value, ms, token)
	switch {
	case err != nil:
		return 0, s.wrap(ctx, op, key, err)
	case status == "exists":
		return 0, store.ErrExists
	case status != "ok":
		return 0, s.wrap(ctx, op, key, unexpected(status))
	}
	return rev, nil
}

// Update writes the value only if revision is still the key's current
// one, returning store.ErrConflict otherwise and store.ErrNotFound if the
// key holds nothing. The value written never expires: a ttl given to
// Create is dropped.
func (s *Store) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	return s.update(ctx, key, value, revision, rand.Text())
}

func (s *Store) update(ctx context.Context, key string, value []byte, revision uint64, token string) (uint64, error) {
	const op = "update"
	if err := s.begin(ctx, op, key); err != nil {
		return 0, err
	}
	rev, status, err := s.run(ctx, updateScript, key, value, strconv.FormatUint(revision, 10), token)
	switch {
	case err != nil:
		return 0, s.wrap(ctx, op, key, err)
	case status == "conflict":
		return 0, store.ErrConflict
	case status == "notfound":
		return 0, store.ErrNotFound
	case status != "ok":
		return 0, s.wrap(ctx, op, key, unexpected(status))
	}
	return rev, nil
}

// Delete removes the key; deleting a missing key is not an error. Nothing
// of the key is left behind, and Create succeeds at once.
func (s *Store) Delete(ctx context.Context, key string) error {
	const op = "delete"
	if err := s.begin(ctx, op, key); err != nil {
		return err
	}
	if err := s.client.Del(ctx, s.stateKey(key)).Err(); err != nil {
		return s.wrap(ctx, op, key, err)
	}
	return nil
}

// run runs one of the key scripts on key and reads its reply: a status
// and, for "ok", the revision.
func (s *Store) run(ctx context.Context, script *redis.Script, key string, args ...any) (rev uint64, status string, err error) {
	return s.runKeys(ctx, script, []string{s.stateKey(key)}, args...)
}

// runKeys is run on the script's keys as given (Redis key names).
func (s *Store) runKeys(ctx context.Context, script *redis.Script, keys []string, args ...any) (rev uint64, status string, err error) {
	res, err := script.Run(ctx, s.client, keys, args...).Slice()
	if err != nil {
		return 0, "", err
	}
	if len(res) > 0 {
		status, _ = res[0].(string)
	}
	if status != "ok" {
		return 0, status, nil
	}
	r, _ := res[len(res)-1].(string)
	if rev, err = strconv.ParseUint(r, 10, 64); len(res) != 2 || err != nil {
		return 0, "", fmt.Errorf("unexpected reply from the script: %q", res)
	}
	return rev, status, nil
}

// unexpected is the error for a script status the caller does not know.
func unexpected(status string) error {
	return fmt.Errorf("unexpected reply from the script: %q", status)
}
