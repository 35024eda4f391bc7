package natsbus

import (
	"errors"
	"fmt"
	"strings"
)

// ErrFull: the input stream refused a publish because a bound it keeps
// with discard-new was reached — a subject at nats.max_msgs_per_subject
// (one agent's backlog: other subjects still take messages), or the
// stream at nats.max_bytes. Nothing that waits was dropped to make room;
// the publisher may retry once the agent has caught up.
var ErrFull = errors.New("input stream full")

// Reasons a publish was refused (FullError.Reason), as metrics label
// them.
const (
	FullSubject = "subject_full"
	FullStream  = "stream_full"
)

// FullReasons are every FullError.Reason.
var FullReasons = []string{FullSubject, FullStream}

// FullError is a refusal of the input stream: what is full, and the
// server's words.
type FullError struct {
	Reason string
	Detail string
}

func (e *FullError) Error() string {
	return fmt.Sprintf("%v: %s: %s", ErrFull, e.Bound(), e.Detail)
}

// Bound says in words which bound was reached.
func (e *FullError) Bound() string {
	if e.Reason == FullSubject {
		return "the subject holds nats.max_msgs_per_subject messages (the agent's backlog is full)"
	}
	return "the stream is at nats.max_bytes"
}

// Unwrap makes errors.Is(err, ErrFull) hold.
func (e *FullError) Unwrap() error { return ErrFull }

// Full returns err as a *FullError when it is the input stream refusing
// a publish for a bound it keeps, else err unchanged.
func Full(err error) error {
	var full *FullError
	if err == nil || errors.As(err, &full) {
		return err // nothing, or said already
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "maximum messages per subject exceeded"):
		return &FullError{Reason: FullSubject, Detail: msg}
	case strings.Contains(msg, "maximum bytes exceeded"), strings.Contains(msg, "maximum messages exceeded"):
		return &FullError{Reason: FullStream, Detail: msg}
	}
	return err
}
