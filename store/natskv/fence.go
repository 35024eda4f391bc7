package natskv

import (
	"context"
	"errors"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/store"
)

// Fences. A fence's key (a lease record) lives in the state bucket, so a
// write there under the fence is one message that carries the check
// itself: Nats-Expected-Last-Subject-Sequence names the fence's revision
// and Nats-Expected-Last-Subject-Sequence-Subject the fence key's subject,
// and the server stores the message only if that subject's last sequence
// is still the revision. (nats-server 2.11 or later; the worker needs
// 2.11 for its input log already.)
//
// A stream checks only its own subjects, and the lists bucket is another
// stream. So Claim mirrors the fence there: a message on the fence key's
// subject in the lists bucket, holding the fence's revision, written only
// forward (compare-and-set on the mirror, and never over a newer fence's)
// and rolled up so one message per fence key is kept. A list append under
// a fence checks the mirror's sequence the same way. A holder claims
// before it reads the agent's state, so an append its predecessor makes
// after that is refused, and one made before it is in what it reads.

// mirror is a fence claimed in the lists bucket: the fence's revision and
// the mirror message's sequence.
type mirror struct {
	rev, seq uint64
}

// Fenced returns the writes under f. The zero fence writes plainly.
func (s *Store) Fenced(f store.Fence) store.Writer {
	if f.IsZero() {
		return s
	}
	return &fenced{s: s, f: f}
}

// fenced is the NATS KV store's writes under a fence.
type fenced struct {
	s *Store
	f store.Fence
}

// Put writes the value in one message that the server stores only while
// the fence holds.
func (w *fenced) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	const op = "put"
	s := w.s
	if err := s.begin(ctx, op, key); err != nil {
		return 0, err
	}
	m := nats.NewMsg(s.stateSubj + key)
	m.Data = value
	ack, err := s.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequenceForSubject(w.f.Revision, s.stateSubj+w.f.Key))
	if err != nil {
		return 0, w.refused(ctx, op, key, value, err)
	}
	return ack.Sequence, nil
}

// Delete purges the key (as Store.Delete does: a marker that expires
// after a minute) in one message stored only while the fence holds.
func (w *fenced) Delete(ctx context.Context, key string) error {
	const op = "delete"
	s := w.s
	if err := s.begin(ctx, op, key); err != nil {
		return err
	}
	m := nats.NewMsg(s.stateSubj + key)
	m.Header.Set(kvOperation, "PURGE")
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	_, err := s.js.PublishMsg(ctx, m, jetstream.WithMsgTTL(markerTTL),
		jetstream.WithExpectLastSequenceForSubject(w.f.Revision, s.stateSubj+w.f.Key))
	if err != nil {
		return w.refused(ctx, op, key, nil, err)
	}
	return nil
}

// Append adds the item in one message stored only while the fence's
// mirror in the lists bucket is the one this fence claimed, then trims the
// list as Store.Append does.
func (w *fenced) Append(ctx context.Context, list string, value []byte, keep int) error {
	const op = "append to list"
	s := w.s
	if err := s.begin(ctx, op, list); err != nil {
		return err
	}
	s.warnKeep(list, keep)
	seq, err := s.mirrored(ctx, w.f)
	if err != nil {
		return wrap(ctx, op, list, err)
	}
	m := nats.NewMsg(s.listSubj + list)
	m.Data = value
	if _, err := s.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequenceForSubject(seq, s.listSubj+w.f.Key)); err != nil {
		if wrongLastSequence(err) {
			s.forget(w.f)
		}
		return w.refused(ctx, op, list, value, err)
	}
	s.trim(ctx, list, keep)
	return nil
}

// refused maps the server's refusal of the fence's check to
// store.ErrFenced.
func (w *fenced) refused(ctx context.Context, op, key string, value []byte, err error) error {
	if wrongLastSequence(err) {
		return wrap(ctx, op, key, store.ErrFenced)
	}
	return w.s.wrapWrite(ctx, op, key, value, err)
}

// Claim mirrors f in the lists bucket: from then on an append under an
// older fence of f.Key is refused there. It is the mirror's
// compare-and-set, forward only: written over the mirror as last known
// (none, for a key never claimed: one request), read again and retried
// when another claim came between, and refused (ErrFenced) when a newer
// fence is mirrored already. It does not read the state bucket: its
// caller has just taken the lease at f, and a fence that moved since is
// refused by every write under it there, and here once its successor
// claims it.
func (s *Store) Claim(ctx context.Context, f store.Fence) error {
	const op = "claim"
	if err := s.begin(ctx, op, f.Key); err != nil {
		return err
	}
	s.mirrorsMu.Lock()
	last := s.mirrors[f.Key] // zero: none known, so none there (or read)
	s.mirrorsMu.Unlock()
	subj := s.listSubj + f.Key
	for range 100 {
		switch {
		case last.rev == f.Revision:
			return nil
		case last.rev > f.Revision:
			return wrap(ctx, op, f.Key, store.ErrFenced)
		}
		m := nats.NewMsg(subj)
		m.Data = []byte(strconv.FormatUint(f.Revision, 10))
		m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
		ack, err := s.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(last.seq))
		switch {
		case err == nil:
			s.remember(f.Key, mirror{rev: f.Revision, seq: ack.Sequence})
			return nil
		case !wrongLastSequence(err):
			return wrap(ctx, op, f.Key, err)
		}
		// The mirror is not as last known: another claim came between,
		// or this store never saw it. Read it, and go on from there.
		rev, seq, err := s.readMirror(ctx, f.Key)
		if err != nil {
			return wrap(ctx, op, f.Key, err)
		}
		last = mirror{rev: rev, seq: seq}
		s.remember(f.Key, last)
	}
	return wrap(ctx, op, f.Key, errors.New("the mirror kept moving"))
}

// mirrored returns the sequence of f's mirror in the lists bucket: from
// the claims this store made or saw, else read. A mirror of another fence
// (a newer one, or an older one f was never claimed over) is ErrFenced.
func (s *Store) mirrored(ctx context.Context, f store.Fence) (uint64, error) {
	s.mirrorsMu.Lock()
	m, ok := s.mirrors[f.Key]
	s.mirrorsMu.Unlock()
	if ok && m.rev == f.Revision {
		return m.seq, nil
	}
	cur, seq, err := s.readMirror(ctx, f.Key)
	if err != nil {
		return 0, err
	}
	if cur != f.Revision {
		return 0, store.ErrFenced
	}
	s.remember(f.Key, mirror{rev: cur, seq: seq})
	return seq, nil
}

// readMirror reads the fence revision mirrored for key in the lists
// bucket and the mirror's sequence; 0, 0 when there is none.
func (s *Store) readMirror(ctx context.Context, key string) (rev, seq uint64, err error) {
	msg, err := s.listStream.GetLastMsgForSubject(ctx, s.listSubj+key)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	rev, _ = strconv.ParseUint(string(msg.Data), 10, 64) // unreadable: no fence claimed
	return rev, msg.Sequence, nil
}

// remember keeps m as key's mirror unless a newer one is known.
func (s *Store) remember(key string, m mirror) {
	s.mirrorsMu.Lock()
	defer s.mirrorsMu.Unlock()
	if cur, ok := s.mirrors[key]; !ok || cur.rev <= m.rev {
		s.mirrors[key] = m
	}
}

// forget drops f's mirror once the server refused it: it is read again.
func (s *Store) forget(f store.Fence) {
	s.mirrorsMu.Lock()
	defer s.mirrorsMu.Unlock()
	if cur, ok := s.mirrors[f.Key]; ok && cur.rev == f.Revision {
		delete(s.mirrors, f.Key)
	}
}
