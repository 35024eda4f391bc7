package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrUnreadable: a stored value is not the JSON its reader expects (a
// record from another version, or damage). Readers decide whether to
// ignore it or fail.
var ErrUnreadable = errors.New("store: unreadable value")

// GetJSON reads key and decodes its JSON value into v. It reports false,
// and no error, when the key does not exist; a value that does not decode
// is an error wrapping ErrUnreadable.
func GetJSON(ctx context.Context, s Store, key string, v any) (bool, error) {
	e, err := s.Get(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(e.Value, v); err != nil {
		return false, fmt.Errorf("%w: %s: %w", ErrUnreadable, key, err)
	}
	return true, nil
}
