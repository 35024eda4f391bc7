package turnlog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/agent-worker/agent-worker/store"
)

// DefaultHandledKeep is how many handled ids an agent's record keeps when
// the writer sets no bound (natsinbox.Options.HandledKeep's default).
const DefaultHandledKeep = 1000

// HandledSetKey is the store key of agent's handled-id record: one key
// per agent, whatever the number of messages it handled, holding the ids
// of its newest handled messages (at most the writer's keep, none older
// than its ttl) with the turn that handled each. The NATS binding writes
// it before it acks; a redelivery or republish of an id it holds is acked
// without a turn.
func HandledSetKey(agent string) string { return "handled." + agent }

// The record's encoding: a version byte, the ttl in nanoseconds (8
// bytes), then one fixed-size entry per id, oldest first: the first 16
// bytes of the id's SHA-256, the turn (8 bytes) and the time it was
// handled (8 bytes, Unix nanoseconds). Big-endian. Fixed-size entries
// make a lookup a scan of the bytes as stored, with no decoding.
const (
	handledVersion = 1
	handledHeader  = 1 + 8
	handledHash    = 16
	handledEntry   = handledHash + 8 + 8
)

// handledHashOf is the id as the record keeps it.
func handledHashOf(id string) [handledHash]byte {
	sum := sha256.Sum256([]byte(id))
	return [handledHash]byte(sum[:handledHash])
}

// handledEntries returns the record's entries (a view of raw) and its
// ttl, or an error if raw is not a record.
func handledEntries(raw []byte) (entries []byte, ttl time.Duration, err error) {
	if len(raw) < handledHeader || raw[0] != handledVersion || (len(raw)-handledHeader)%handledEntry != 0 {
		return nil, 0, fmt.Errorf("not a handled-id record (%d bytes)", len(raw))
	}
	return raw[handledHeader:], time.Duration(binary.BigEndian.Uint64(raw[1:9])), nil
}

// findHandled returns the newest live entry of id in a record's entries.
func findHandled(entries []byte, id string, ttl time.Duration, now time.Time) (Handled, bool) {
	h := handledHashOf(id)
	for off := len(entries) - handledEntry; off >= 0; off -= handledEntry {
		e := entries[off : off+handledEntry]
		if !bytes.Equal(e[:handledHash], h[:]) {
			continue
		}
		at := time.Unix(0, int64(binary.BigEndian.Uint64(e[handledHash+8:]))).UTC()
		if ttl > 0 && now.Sub(at) >= ttl {
			return Handled{}, false
		}
		return Handled{ID: id, Turn: binary.BigEndian.Uint64(e[handledHash:]), At: at}, true
	}
	return Handled{}, false
}

// mergeHandled returns a record of old's live entries followed by add's,
// keeping the newest keep and none older than ttl at now.
func mergeHandled(old []byte, add []Handled, keep int, ttl time.Duration, now time.Time) []byte {
	live := old
	if ttl > 0 {
		// Entries are oldest first: skip the expired prefix. Times are
		// the writers' clocks, so an out-of-order entry may outlive its
		// ttl by as much as the clocks disagree.
		for len(live) >= handledEntry && now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(live[handledHash+8:handledEntry])))) >= ttl {
			live = live[handledEntry:]
		}
	}
	n := min(len(live)/handledEntry+len(add), keep)
	out := make([]byte, handledHeader, handledHeader+n*handledEntry)
	out[0] = handledVersion
	binary.BigEndian.PutUint64(out[1:9], uint64(ttl))
	if drop := len(live)/handledEntry + len(add) - n; drop > 0 {
		skip := min(drop, len(live)/handledEntry)
		live, add = live[skip*handledEntry:], add[drop-skip:]
	}
	out = append(out, live...)
	for _, h := range add {
		sum := handledHashOf(h.ID)
		out = append(out, sum[:]...)
		out = binary.BigEndian.AppendUint64(out, h.Turn)
		out = binary.BigEndian.AppendUint64(out, uint64(h.At.UnixNano()))
	}
	return out
}

// maxHandledRaces bounds the compare-and-set retries of RecordHandled
// when other writers keep changing the record (a lease handover in
// progress); each retry rereads it.
const maxHandledRaces = 16

// RecordHandled adds hs to agent's handled-id record in one
// compare-and-set (two round trips: read, write), keeping its newest
// keep ids (DefaultHandledKeep when <= 0) and none older than ttl
// (DefaultTTL when <= 0) at now. A record that cannot be read as one
// (written by a newer version) is replaced. The store's error is
// returned, or one saying the record kept changing.
func RecordHandled(ctx context.Context, st store.Store, agent string, hs []Handled, keep int, ttl time.Duration, now time.Time) error {
	if len(hs) == 0 {
		return nil
	}
	if keep <= 0 {
		keep = DefaultHandledKeep
	}
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	key := HandledSetKey(agent)
	for range maxHandledRaces {
		e, err := st.Get(ctx, key)
		switch {
		case errors.Is(err, store.ErrNotFound):
			_, err = st.Create(ctx, key, mergeHandled(nil, hs, keep, ttl, now), 0)
			if errors.Is(err, store.ErrExists) {
				continue
			}
			return err
		case err != nil:
			return err
		}
		entries, _, derr := handledEntries(e.Value)
		if derr != nil {
			entries = nil
		}
		_, err = st.Update(ctx, key, mergeHandled(entries, hs, keep, ttl, now), e.Revision)
		if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
			continue
		}
		return err
	}
	return fmt.Errorf("handled-id record of %s kept changing: %d tries", agent, maxHandledRaces)
}

// LookupHandled returns what agent's handled-id record says of id at now:
// the turn that handled it, or ok false when the record does not hold it
// (never handled, evicted by newer ids, or older than the record's ttl).
// The error is the store's (never store.ErrNotFound) or a record that
// cannot be read.
func LookupHandled(ctx context.Context, st store.Store, agent, id string, now time.Time) (h Handled, ok bool, err error) {
	e, err := st.Get(ctx, HandledSetKey(agent))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Handled{}, false, nil
	case err != nil:
		return Handled{}, false, err
	}
	entries, ttl, err := handledEntries(e.Value)
	if err != nil {
		return Handled{}, false, fmt.Errorf("%s: %w", HandledSetKey(agent), err)
	}
	h, ok = findHandled(entries, id, ttl, now)
	return h, ok, nil
}
