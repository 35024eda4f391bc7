package redisstore

import (
	"context"
	"crypto/rand"
	"strconv"

	"github.com/agent-worker/agent-worker/store"
)

// Append adds value as the newest item of the list and trims the list to
// its newest keep items (keep <= 0 keeps everything), in one atomic step on
// the server: Tail never sees more than keep items, and the server never
// holds more.
func (s *Store) Append(ctx context.Context, list string, value []byte, keep int) error {
	return s.append(ctx, list, value, keep, rand.Text())
}

func (s *Store) append(ctx context.Context, list string, value []byte, keep int, token string) error {
	return s.appendUnder(ctx, store.Fence{}, list, value, keep, token)
}

// appendUnder is append under f (the zero fence: none).
func (s *Store) appendUnder(ctx context.Context, f store.Fence, list string, value []byte, keep int, token string) error {
	const op = "append to list"
	if err := s.begin(ctx, op, list); err != nil {
		return err
	}
	start := "0"
	if keep > 0 {
		start = strconv.Itoa(-keep)
	}
	keys, args, err := s.fence(ctx, f, []string{s.listKey(list), s.listTokenKey(list)}, value, start, token)
	if err != nil {
		return s.wrap(ctx, op, list, err)
	}
	n, err := appendScript.Run(ctx, s.client, keys, args...).Int()
	switch {
	case err != nil:
		return s.wrap(ctx, op, list, err)
	case n < 0:
		return s.wrap(ctx, op, list, store.ErrFenced)
	}
	return nil
}

// Tail returns the newest n items of the list, oldest first (n <= 0: all
// of them). A missing list is empty, not an error.
func (s *Store) Tail(ctx context.Context, list string, n int) ([][]byte, error) {
	const op = "read list"
	if err := s.begin(ctx, op, list); err != nil {
		return nil, err
	}
	start := int64(0)
	if n > 0 {
		start = -int64(n)
	}
	items, err := s.client.LRange(ctx, s.listKey(list), start, -1).Result()
	if err != nil {
		return nil, s.wrap(ctx, op, list, err)
	}
	out := make([][]byte, len(items))
	for i, it := range items {
		out[i] = []byte(it)
	}
	return out, nil
}
