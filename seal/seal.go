// Package seal tells what the worker itself put on NATS from what anyone
// else did. Every replica of a deployment shares one secret key, which
// comes from a secret the operator controls (a file, an environment
// variable, a Kubernetes Secret; on the embedded default a file of its own
// in the data dir), never from the NATS state a publisher may read. A
// message the worker publishes with a meaning a stranger must not claim (a
// subagent's report, a message from the Alertmanager receiver, a control
// verb forwarded from one replica to another) carries an HMAC-SHA256 seal
// over its subject, the headers that give it that meaning and its body. A
// receiver grants the meaning only to a message whose seal checks.
//
// Guaranteed: without the key, nobody can make a seal that checks, nor move
// a sealed message to another subject or change its body or sealed
// headers. While a key is rotated, seals made with the previous key still
// check (WithPrevious); new seals are made with the current key only. Not
// guaranteed: secrecy of the key from whoever can read its file or
// variable. A seal does not stop a replay of the same message on the same
// subject; receivers that must not act twice deduplicate (message ids) or
// bound the replay window (Check's freshness).
package seal

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"hash"
)

// keyBytes is the key's length: HMAC-SHA256's block size would add nothing.
const keyBytes = 32

// Key is a deployment's sealing key, with the key it replaces while a
// rotation runs. The zero Key seals nothing: Sign returns "" and Verify is
// false.
type Key struct {
	k    []byte
	prev []byte
}

// NewKey returns a key of the given bytes (tests, and a receiver handed the
// key by its owner). It copies b.
func NewKey(b []byte) Key { return Key{k: append([]byte(nil), b...)} }

// Generate returns a new random key.
func Generate() Key {
	k := make([]byte, keyBytes)
	_, _ = rand.Read(k) // crypto/rand.Read never fails on supported platforms.
	return Key{k: k}
}

// WithPrevious returns k that also accepts seals made with prev (its
// current key): for a rotation, while some replicas still seal with the
// old key. Seals are still made with k alone.
func (k Key) WithPrevious(prev Key) Key {
	return Key{k: k.k, prev: prev.k}
}

// Valid reports whether k can seal.
func (k Key) Valid() bool { return len(k.k) > 0 }

// Equal reports whether k and o seal alike (their current keys are the
// same), in constant time.
func (k Key) Equal(o Key) bool { return k.Valid() && hmac.Equal(k.k, o.k) }

// Encode returns the key's text form (base64), as Parse reads it: what a
// key file holds.
func (k Key) Encode() string { return base64.StdEncoding.EncodeToString(k.k) }

// Fingerprint names the key without giving it away (the first bytes of
// an HMAC over a fixed text): two replicas with different fingerprints
// cannot check each other's seals. "" for the zero Key.
func (k Key) Fingerprint() string {
	if !k.Valid() {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(mac(k.k, [][]byte{[]byte("agent-worker seal fingerprint")})[:9])
}

// Sign returns the seal over parts, in order: each part is length-prefixed,
// so ("ab", "c") and ("a", "bc") seal differently. It is "" for the zero
// Key.
func (k Key) Sign(parts ...[]byte) string {
	if !k.Valid() {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(mac(k.k, parts))
}

// Verify reports whether seal is k's seal over parts (or, while rotating,
// the previous key's), in constant time.
func (k Key) Verify(seal string, parts ...[]byte) bool {
	if !k.Valid() || seal == "" {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(seal)
	if err != nil {
		return false
	}
	ok := hmac.Equal(got, mac(k.k, parts))
	if len(k.prev) > 0 && hmac.Equal(got, mac(k.prev, parts)) {
		ok = true
	}
	return ok
}

func mac(key []byte, parts [][]byte) []byte {
	h := hmac.New(sha256.New, key)
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
