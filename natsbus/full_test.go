package natsbus

import (
	"context"
	"errors"
	"testing"
)

// The input stream's refusals are told apart from other publish errors:
// a full subject (one agent's backlog) and a full stream.
func TestFullNamesWhatIsFull(t *testing.T) {
	t.Parallel()
	c := embedded(t)
	ctx := context.Background()
	spec := StreamSpec{Name: "IN", Subjects: []string{"in.*"}, Limits: true, DiscardNew: true, MaxMsgsPerSubject: 1, MaxBytes: 1 << 20}
	if _, err := EnsureStream(ctx, c.JS, spec, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.JS.Publish(ctx, "in.a", []byte("one")); err != nil {
		t.Fatal(err)
	}
	_, err := c.JS.Publish(ctx, "in.a", []byte("two"))
	var full *FullError
	if err = Full(err); !errors.Is(err, ErrFull) || !errors.As(err, &full) || full.Reason != FullSubject {
		t.Fatalf("second publish to a full subject: %v", err)
	}
	if _, err := c.JS.Publish(ctx, "in.b", make([]byte, 1<<19)); err != nil {
		t.Fatalf("another subject: %v", err)
	}
	_, err = c.JS.Publish(ctx, "in.c", make([]byte, 1<<19))
	if err = Full(err); !errors.As(err, &full) || full.Reason != FullStream {
		t.Fatalf("publish past max_bytes: %v", err)
	}
	if other := errors.New("nats: timeout"); Full(other) != other {
		t.Fatal("another error was taken for a refusal")
	}
}
