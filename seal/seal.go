// Package seal tells what the worker itself put on NATS from what anyone
// else did. Every replica of a deployment shares one secret key, kept in
// the state store; a message the worker publishes with a meaning a stranger
// must not claim (a subagent's report, a message from the Alertmanager
// receiver, a control verb forwarded from one replica to another) carries
// an HMAC-SHA256 seal over its subject, the headers that give it that
// meaning and its body. A receiver grants the meaning only to a message
// whose seal checks.
//
// Guaranteed: without the key, nobody can make a seal that checks, nor move
// a sealed message to another subject or change its body or sealed
// headers. Not guaranteed: secrecy of the key from whoever can read the
// store (the JetStream KV bucket or Redis): they hold the worker's state
// and are trusted like the worker. A seal does not stop a replay of the same
// message on the same subject; receivers that must not act twice
// deduplicate (message ids) or bound the replay window (Check's freshness).
package seal

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"

	"github.com/agent-worker/agent-worker/store"
)

// StoreKey is where the deployment's key lives in the store. Deleting it
// (with every replica stopped) makes the next start create a new one.
const StoreKey = "worker.seal"

// keyBytes is the key's length: HMAC-SHA256's block size would add nothing.
const keyBytes = 32

// Key is a deployment's sealing key. The zero Key seals nothing: Sign
// returns "" and Verify is false.
type Key struct {
	k []byte
}

// Load returns the deployment's key from st, creating it on first use;
// replicas starting together agree on one key (the store's Create decides).
// Its error is the store's.
func Load(ctx context.Context, st store.Store) (Key, error) {
	for range 3 {
		e, err := st.Get(ctx, StoreKey)
		if err == nil {
			if len(e.Value) != keyBytes {
				return Key{}, fmt.Errorf("seal: %s holds %d bytes, want %d (delete it with every replica stopped to make a new key)", StoreKey, len(e.Value), keyBytes)
			}
			return Key{k: e.Value}, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return Key{}, fmt.Errorf("seal: read %s: %w", StoreKey, err)
		}
		k := make([]byte, keyBytes)
		_, _ = rand.Read(k) // crypto/rand.Read never fails on supported platforms.
		if _, err := st.Create(ctx, StoreKey, k, 0); err == nil {
			return Key{k: k}, nil
		} else if !errors.Is(err, store.ErrExists) {
			return Key{}, fmt.Errorf("seal: create %s: %w", StoreKey, err)
		}
		// Another replica created it first: read theirs.
	}
	return Key{}, fmt.Errorf("seal: %s keeps changing under this replica", StoreKey)
}

// NewKey returns a key of the given bytes (tests, and a receiver handed the
// key by its owner). It copies b.
func NewKey(b []byte) Key { return Key{k: append([]byte(nil), b...)} }

// Valid reports whether k can seal.
func (k Key) Valid() bool { return len(k.k) > 0 }

// Sign returns the seal over parts, in order: each part is length-prefixed,
// so ("ab", "c") and ("a", "bc") seal differently. It is "" for the zero
// Key.
func (k Key) Sign(parts ...[]byte) string {
	if !k.Valid() {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(k.mac(parts))
}

// Verify reports whether seal is k's seal over parts, in constant time.
func (k Key) Verify(seal string, parts ...[]byte) bool {
	if !k.Valid() || seal == "" {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(seal)
	if err != nil {
		return false
	}
	return hmac.Equal(got, k.mac(parts))
}

func (k Key) mac(parts [][]byte) []byte {
	h := hmac.New(sha256.New, k.k)
	for _, p := range parts {
		writePart(h, p)
	}
	return h.Sum(nil)
}

func writePart(h hash.Hash, p []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(p)))
	h.Write(n[:])
	h.Write(p)
}
