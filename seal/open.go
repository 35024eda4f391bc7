package seal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/agent-worker/agent-worker/store"
)

// Source says where a replica's key comes from.
type Source struct {
	// Key is the configured key's text (from the operator's file or
	// variable); "" for none. Where names its origin in messages
	// ("seal.key_file /etc/…").
	Key, Where string
	// Previous is the key being rotated out, "" for none.
	Previous, PreviousWhere string
	// LocalFile is where the key lives without a configured one (the
	// embedded default's data_dir/seal.key).
	LocalFile string
}

// Open returns the replica's key, and takes out of st a key an older
// worker kept there (StoreKey), where every NATS client could read it:
//
//   - a configured key is used as it is, and the stored one is deleted
//     (its seals no longer check, unless it is also the previous key);
//   - without one, the local file is used, made on first start: from the
//     stored key if there is one (moved, so that what it sealed still
//     checks), else a new one.
//
// Every step is logged at INFO (a move, a new key) or WARN (a stored key
// deleted unused, a file narrowed to 0600). An error says what to fix;
// the start must not go on with a key left in the store.
func Open(ctx context.Context, src Source, st store.Store, log *slog.Logger) (Key, error) {
	stored, found, err := ReadStored(ctx, st)
	if err != nil && !found {
		return Key{}, err
	}
	var k Key
	if src.Key != "" {
		if k, err = Parse(src.Key); err != nil {
			return Key{}, fmt.Errorf("%s: %w", src.Where, err)
		}
		if src.Previous != "" {
			prev, err := Parse(src.Previous)
			if err != nil {
				return Key{}, fmt.Errorf("%s: %w", src.PreviousWhere, err)
			}
			k = k.WithPrevious(prev)
			log.Info("seal key rotating: seals made with the previous key still check", "key", k.Fingerprint(), "previous", prev.Fingerprint())
		}
		if found {
			if err := DeleteStored(ctx, st); err != nil {
				return Key{}, err
			}
			if k.Equal(stored) {
				log.Info("seal key: deleted the copy an older worker kept in the state store; the key now comes from "+src.Where, "store_key", StoreKey)
			} else {
				log.Warn("seal key: deleted the key an older worker kept in the state store, where NATS clients could read it; messages it sealed no longer check (to carry them over, set it as seal.previous_key_file before the upgrade)",
					"store_key", StoreKey, "key_from", src.Where)
			}
		}
		return k, nil
	}
	if found && err == nil {
		if _, statErr := os.Stat(src.LocalFile); errors.Is(statErr, fs.ErrNotExist) {
			if err := WriteLocal(src.LocalFile, stored); err != nil && !errors.Is(err, fs.ErrExist) {
				return Key{}, err
			}
			if err := DeleteStored(ctx, st); err != nil {
				return Key{}, err
			}
			log.Info("seal key moved out of the state store, where NATS clients could read it, into a file of its own", "file", src.LocalFile, "mode", "0600", "store_key", StoreKey)
			return loadLocal(src.LocalFile, log)
		}
	}
	k, err = loadLocal(src.LocalFile, log)
	if err != nil {
		return Key{}, err
	}
	if found {
		if err := DeleteStored(ctx, st); err != nil {
			return Key{}, err
		}
		log.Warn("seal key: deleted the key an older worker kept in the state store, where NATS clients could read it; this replica keeps the key in its file", "file", src.LocalFile, "store_key", StoreKey)
	}
	return k, nil
}

func loadLocal(path string, log *slog.Logger) (Key, error) {
	k, created, narrowed, err := LoadLocal(path)
	switch {
	case err != nil:
		return Key{}, err
	case created:
		log.Info("seal key made", "file", path, "mode", "0600")
	case narrowed:
		log.Warn("seal key file was readable by others: narrowed to 0600", "file", path)
	}
	return k, nil
}
