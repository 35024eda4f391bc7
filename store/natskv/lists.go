package natskv

import (
	"context"
	"time"

	"github.com/agent-worker/agent-worker/natsbus"
	"github.com/nats-io/nats.go/jetstream"
)

// MaxListItems bounds every list: the lists bucket keeps at most this many
// items per list (its KV history, which JetStream caps at 64), whatever
// keep Append is given.
const MaxListItems = jetstream.KeyValueMaxHistory

// trimTimeout bounds Append's trim, which runs even when the caller's
// context ends right after the item was written.
const trimTimeout = 5 * time.Second

// Append adds value as the newest item of the list and trims the list to
// its newest keep items.
//
// A list is one key of the lists bucket and its items are that key's
// revisions, so the server itself never keeps more than MaxListItems per
// list. keep <= 0 or keep > MaxListItems keeps MaxListItems (the first
// such call is logged). For a smaller keep, Append purges the key's older
// revisions after writing; that is a second request, so:
//   - between the write and the trim, Tail(0) may see keep+1 items;
//   - if the trim fails, Append still returns nil, because the item is
//     stored and a retry would append it twice; the failure is logged and
//     the next Append trims again.
//
// Tail(n) with n <= keep is exact either way.
func (s *Store) Append(ctx context.Context, list string, value []byte, keep int) error {
	const op = "append to list"
	if err := s.begin(ctx, op, list); err != nil {
		return err
	}
	s.warnKeep(list, keep)
	if _, err := s.lists.Put(ctx, list, value); err != nil {
		return s.wrapWrite(ctx, op, list, value, err)
	}
	s.trim(ctx, list, keep)
	return nil
}

// warnKeep logs, once per store, a keep beyond what a list holds.
func (s *Store) warnKeep(list string, keep int) {
	if keep <= 0 || keep > MaxListItems {
		s.keepWarned.Do(func() {
			s.log.Warn("list keep beyond what NATS KV holds; keeping the newest items only",
				"list", list, "keep", keep, "kept", MaxListItems)
		})
	}
}

// trim purges the list's items older than its newest keep, after an
// append; a failure is logged, and the next append trims again.
func (s *Store) trim(ctx context.Context, list string, keep int) {
	if keep <= 0 || keep >= MaxListItems {
		return
	}
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), trimTimeout)
	defer cancel()
	err := s.listStream.Purge(tctx, jetstream.WithPurgeSubject(s.listSubj+list), jetstream.WithPurgeKeep(uint64(keep)))
	if err != nil {
		s.log.Warn("trim list after append; it holds more than keep until the next append",
			"list", list, "keep", keep, "err", err)
	}
}

// Tail returns the newest n items of the list, oldest first (n <= 0: all
// it holds, at most MaxListItems). A missing list is empty, not an error.
// It reads the list's items with one batch direct get (any server with a
// copy answers; no consumer is made), so its cost grows with what the
// list holds (its keep), not with how often it was appended.
func (s *Store) Tail(ctx context.Context, list string, n int) ([][]byte, error) {
	const op = "read list"
	if err := s.begin(ctx, op, list); err != nil {
		return nil, err
	}
	res, err := natsbus.DirectBatch(ctx, s.nc, natsbus.DirectRequest{Stream: s.listStream.CachedInfo().Config.Name,
		Filter: s.listSubj + list, Batch: MaxListItems + 1})
	if err != nil {
		return nil, wrap(ctx, op, list, err)
	}
	var items [][]byte
	for _, m := range res.Msgs {
		if m.Header.Get(kvOperation) != "" {
			continue // a delete or purge marker, not an item
		}
		items = append(items, m.Data)
	}
	if n > 0 && len(items) > n {
		items = items[len(items)-n:]
	}
	return items, nil
}

// kvOperation is the header JetStream KV marks a delete or a purge with;
// an item (a put) has none.
const kvOperation = "KV-Operation"
