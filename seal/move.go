package seal

import (
	"context"
	"errors"
	"fmt"

	"github.com/agent-worker/agent-worker/store"
)

// StoreKey is where workers before the key left the store kept it: in
// the state store, which every NATS client with default permissions
// could read. MoveOut takes it out.
const StoreKey = "worker.seal"

// ReadStored returns the key kept in st at StoreKey by an older worker,
// and whether there is one. A value that is no key is an error.
func ReadStored(ctx context.Context, st store.Store) (Key, bool, error) {
	e, err := st.Get(ctx, StoreKey)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Key{}, false, nil
	case err != nil:
		return Key{}, false, fmt.Errorf("seal: read %s: %w", StoreKey, err)
	case len(e.Value) != keyBytes:
		return Key{}, true, fmt.Errorf("seal: %s holds %d bytes, want %d", StoreKey, len(e.Value), keyBytes)
	}
	return NewKey(e.Value), true, nil
}

// DeleteStored deletes the key kept at StoreKey; deleting one that is
// not there is no error.
func DeleteStored(ctx context.Context, st store.Store) error {
	if err := st.Delete(ctx, StoreKey); err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("seal: delete %s: %w", StoreKey, err)
	}
	return nil
}
