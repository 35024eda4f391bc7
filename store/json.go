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

// UpdateJSON applies fn to key's JSON value (T's zero value when the key
// does not exist) and writes the result with compare-and-set — Create
// when the key was absent, Update at the revision read — reading and
// applying fn again when another writer came first. fn returns whether to
// write; an error from fn is returned and nothing is written. A value
// that does not decode is an error wrapping ErrUnreadable.
func UpdateJSON[T any](ctx context.Context, s Store, key string, fn func(*T) (bool, error)) error {
	for range 50 {
		var v T
		e, err := s.Get(ctx, key)
		exists := err == nil
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return err
		default:
			if err := json.Unmarshal(e.Value, &v); err != nil {
				return fmt.Errorf("%w: %s: %w", ErrUnreadable, key, err)
			}
		}
		write, err := fn(&v)
		if err != nil || !write {
			return err
		}
		data, err := json.Marshal(&v)
		if err != nil {
			return err
		}
		if exists {
			_, err = s.Update(ctx, key, data, e.Revision)
		} else {
			_, err = s.Create(ctx, key, data, 0)
		}
		if errors.Is(err, ErrConflict) || errors.Is(err, ErrExists) || errors.Is(err, ErrNotFound) {
			continue
		}
		return err
	}
	return fmt.Errorf("update %s: too many concurrent changes", key)
}
