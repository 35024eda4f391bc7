package storetest

import (
	"context"

	"github.com/agent-worker/agent-worker/store"
)

// EveryCall returns a call of each store.Store method on key (lists and
// keys alike), by method name, each returning only its error: for tests
// that every method refuses the same way (a closed store, an invalid
// key).
func EveryCall(ctx context.Context, s store.Store, key string) map[string]func() error {
	return map[string]func() error{
		"Get":    func() error { _, err := s.Get(ctx, key); return err },
		"Put":    func() error { _, err := s.Put(ctx, key, nil); return err },
		"Create": func() error { _, err := s.Create(ctx, key, nil, 0); return err },
		"Update": func() error { _, err := s.Update(ctx, key, nil, 1); return err },
		"Delete": func() error { return s.Delete(ctx, key) },
		"Append": func() error { return s.Append(ctx, key, nil, 1) },
		"Tail":   func() error { _, err := s.Tail(ctx, key, 1); return err },
	}
}
