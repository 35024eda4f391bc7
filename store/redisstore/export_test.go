package redisstore

import (
	"context"
	"time"
)

// The write methods with a chosen token, so tests can send a write twice
// as go-redis does when a reply is lost.

func (s *Store) PutWithToken(ctx context.Context, key string, value []byte, token string) (uint64, error) {
	return s.put(ctx, key, value, token)
}

func (s *Store) CreateWithToken(ctx context.Context, key string, value []byte, ttl time.Duration, token string) (uint64, error) {
	return s.create(ctx, key, value, ttl, token)
}

func (s *Store) UpdateWithToken(ctx context.Context, key string, value []byte, revision uint64, token string) (uint64, error) {
	return s.update(ctx, key, value, revision, token)
}

func (s *Store) AppendWithToken(ctx context.Context, list string, value []byte, keep int, token string) error {
	return s.append(ctx, list, value, keep, token)
}
