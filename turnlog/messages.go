package turnlog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agent-worker/agent-worker/internal/textclip"
	"github.com/agent-worker/agent-worker/store"
)

// DefaultTTL is how long a dead-letter record is kept when the writer
// sets none (natsinbox.Options.DeadLetterTTL's default).
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
	d.Detail, d.Subject = textclip.RunesWithin(d.Detail, MaxError, "…"), textclip.RunesWithin(d.Subject, MaxField*2, "…")
	raw, _ := json.Marshal(d)
	l.w.enqueue(agent, job{what: "dead-letter record of " + textclip.RunesWithin(d.ID, MaxField, "…"), run: func(ctx context.Context) error {
		_, err := l.st.Create(ctx, DeadLetterKey(agent, d.ID), raw, ttl)
		if errors.Is(err, store.ErrExists) {
			return nil
		}
		return err
	}})
}

// DeadLettered returns the record of why the message with id of agent
// was dead-lettered, or nil when the store has none (never, or more than
// its TTL ago).
func (l *Log) DeadLettered(ctx context.Context, agent, id string) (*DeadLetter, error) {
	var d DeadLetter
	found, err := store.GetJSON(ctx, l.st, DeadLetterKey(agent, id), &d)
	if err != nil {
		return nil, fmt.Errorf("look up message %q of %s: %w", textclip.RunesWithin(id, MaxField, "…"), agent, err)
	}
	if !found {
		return nil, nil
	}
	return &d, nil
}
