package turnlog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agent-worker/agent-worker/store"
)

// DefaultTTL is how long a handled id or a dead-letter record is kept
// when the writer sets none (natsinbox.Options.HandledTTL's default).
const DefaultTTL = 24 * time.Hour

// hashID keeps keys short and within the store's key alphabet whatever
// the id holds.
func hashID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:16])
}

// DeadLetterKey is the store key that records why the message with id was
// dead-lettered.
func DeadLetterKey(agent, id string) string { return "deadletter." + agent + "." + hashID(id) }

// Handled is what an agent's handled-id record (HandledSetKey) says of
// one message id.
type Handled struct {
	ID string `json:"id"`
	// Turn is the number of the turn that handled the message; 0 when
	// the binding was not told.
	Turn uint64    `json:"turn,omitempty"`
	At   time.Time `json:"at"`
}

// DeadLetter says why a message was dead-lettered.
type DeadLetter struct {
	ID string `json:"id"`
	// Reason is the closed set of the dead-letter header
	// (Agent-Worker-Reject-Reason: invalid_json, too_large, dropped, ...);
	// Detail says it in words.
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
	// Subject is the subject the message arrived on, DLQ the dead-letter
	// subject it was published to ("" when it was dropped from memory
	// only: a message that never went through NATS).
	Subject string    `json:"subject,omitempty"`
	DLQ     string    `json:"dlq,omitempty"`
	At      time.Time `json:"at"`
}

// DeadLetter queues a record of d for agent, kept for ttl (DefaultTTL
// when <= 0). The first record of an id stands until it expires. It is
// written in the background (see Record); a record without an id is not
// written.
func (l *Log) DeadLetter(agent string, d DeadLetter, ttl time.Duration) {
	if d.ID == "" {
		return
	}
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	d.Detail, d.Subject = Clip(d.Detail, MaxError), Clip(d.Subject, MaxField*2)
	raw, _ := json.Marshal(d)
	l.w.enqueue(agent, job{what: "dead-letter record of " + Clip(d.ID, MaxField), run: func(ctx context.Context) error {
		_, err := l.st.Create(ctx, DeadLetterKey(agent, d.ID), raw, ttl)
		if errors.Is(err, store.ErrExists) {
			return nil
		}
		return err
	}})
}

// Fate is what the store knows of a message: handled (by which turn),
// dead-lettered (why), both (it came again after one and met the other;
// At tells which was last) or neither.
type Fate struct {
	Handled    *Handled
	DeadLetter *DeadLetter
}

// Fate reads agent's handled-id record (HandledSetKey) and the message
// id's dead-letter record: two reads, made at once.
func (l *Log) Fate(ctx context.Context, agent, id string) (Fate, error) {
	var (
		f    Fate
		derr error
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		var d DeadLetter
		var found bool
		found, derr = store.GetJSON(ctx, l.st, DeadLetterKey(agent, id), &d)
		if found {
			f.DeadLetter = &d
		}
	}()
	h, ok, herr := LookupHandled(ctx, l.st, agent, id, time.Now())
	if ok {
		f.Handled = &h
	}
	<-done
	if err := errors.Join(herr, derr); err != nil {
		return Fate{}, fmt.Errorf("look up message %q of %s: %w", Clip(id, MaxField), agent, err)
	}
	return f, nil
}
