package redisstore

import (
	"context"
	"crypto/rand"
	"errors"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/agent-worker/agent-worker/store"
)

// Fenced returns the writes under f. Each is one script that reads the
// fence key's revision and writes only if it is still f's: one atomic
// step on the server, on one server or Sentinel's master.
//
// Not guaranteed on Redis Cluster: there a write's key and its fence key
// are in different hash slots (unless Options.Prefix has a {hash tag},
// which puts every key in one), and a script may touch one slot only. The
// fence is then read one round trip before the write: a writer that
// freezes between the two still lands that one write. Give the prefix a
// hash tag for fences that hold under timing faults on Cluster.
func (s *Store) Fenced(f store.Fence) store.Writer {
	if f.IsZero() {
		return s
	}
	return &fenced{s: s, f: f}
}

// fenced is the Redis store's writes under a fence.
type fenced struct {
	s *Store
	f store.Fence
}

func (w *fenced) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	return w.s.putUnder(ctx, w.f, key, value, rand.Text())
}

func (w *fenced) Append(ctx context.Context, list string, value []byte, keep int) error {
	return w.s.appendUnder(ctx, w.f, list, value, keep, rand.Text())
}

func (w *fenced) Delete(ctx context.Context, key string) error {
	const op = "delete"
	s := w.s
	if err := s.begin(ctx, op, key); err != nil {
		return err
	}
	keys, args, err := s.fence(ctx, w.f, []string{s.stateKey(key)})
	if err != nil {
		return s.wrap(ctx, op, key, err)
	}
	if len(keys) == 1 { // checked already (Cluster)
		err = s.client.Del(ctx, keys[0]).Err()
	} else {
		var n int
		n, err = deleteScript.Run(ctx, s.client, keys, args...).Int()
		if err == nil && n < 0 {
			err = store.ErrFenced
		}
	}
	if err != nil {
		return s.wrap(ctx, op, key, err)
	}
	return nil
}

// Claim checks that f holds. Every key lives where a fenced write reads
// the fence in the same script, so there is nothing to mirror.
func (s *Store) Claim(ctx context.Context, f store.Fence) error {
	const op = "claim"
	if err := s.begin(ctx, op, f.Key); err != nil {
		return err
	}
	if err := s.holds(ctx, f); err != nil {
		return s.wrap(ctx, op, f.Key, err)
	}
	return nil
}

// fence returns a fenced script's keys and arguments: keys (Redis names)
// then f's key, args then f's revision; or, where f's key is in another
// Cluster slot than keys, keys and args as they are once f is checked
// to hold now. The zero fence adds nothing.
func (s *Store) fence(ctx context.Context, f store.Fence, keys []string, args ...any) ([]string, []any, error) {
	if f.IsZero() {
		return keys, args, nil
	}
	fk := s.stateKey(f.Key)
	if s.target.topology == cluster && slotOf(fk) != slotOf(keys[0]) {
		return keys, args, s.holds(ctx, f)
	}
	return append(keys, fk), append(args, strconv.FormatUint(f.Revision, 10)), nil
}

// holds returns nil if f's key has f's revision now, else
// store.ErrFenced.
func (s *Store) holds(ctx context.Context, f store.Fence) error {
	r, err := s.client.HGet(ctx, s.stateKey(f.Key), "r").Result()
	switch {
	case err == nil && r == strconv.FormatUint(f.Revision, 10):
		return nil
	case err == nil || errors.Is(err, redis.Nil):
		return store.ErrFenced
	}
	return err
}

// slotOf is the Redis Cluster hash slot of key: CRC16 (XMODEM) of its
// {hash tag} if it has a non-empty one, else of the whole key, mod 16384.
func slotOf(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}
