package natsbus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// StreamSpec is the stream the worker needs.
type StreamSpec struct {
	Name string
	// Subjects are the agents' inbox and deferred wildcards plus every
	// subject an agent binds.
	Subjects        []string
	DuplicateWindow time.Duration
	// MaxAge bounds how long an unhandled message is kept. Default 7 days.
	MaxAge time.Duration
	// WorkQueue makes a work-queue stream (each message is removed once
	// one consumer acks it; consumers' filters must not overlap) instead
	// of the agents' input stream's interest retention. The subagent jobs
	// and charges stream is one.
	WorkQueue bool
	// Description is the stream's description. Default: the input
	// stream's.
	Description string
}

// managedKey marks, in the stream's metadata, a stream agent-worker
// created; a stream without it is never changed.
const managedKey = "agent-worker"

// ErrStreamConflict: a stream of that name exists and cannot be used as
// it is.
var ErrStreamConflict = errors.New("stream conflict")

// EnsureStream creates the stream or brings an existing one, created by
// agent-worker, up to date (subjects, duplicate window, max age). A stream
// of the same name that agent-worker did not create, or whose retention or
// storage differ (which JetStream cannot change in place), is an error
// wrapping ErrStreamConflict that says what differs; nothing is changed.
//
// The input stream uses interest retention: a message is removed once
// every agent that it is for has acked it, so handled input does not pile
// up. A spec with WorkQueue uses work-queue retention instead: a message
// is removed once one consumer acked it.
func EnsureStream(ctx context.Context, js jetstream.JetStream, spec StreamSpec, log *slog.Logger) (jetstream.Stream, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if spec.MaxAge == 0 {
		spec.MaxAge = 7 * 24 * time.Hour
	}
	if spec.Description == "" {
		spec.Description = "agent-worker: agents' inbox and deferred input"
	}
	retention := jetstream.InterestPolicy
	if spec.WorkQueue {
		retention = jetstream.WorkQueuePolicy
	}
	subjects := slices.Clone(spec.Subjects)
	slices.Sort(subjects)
	subjects = slices.Compact(subjects)
	want := jetstream.StreamConfig{
		Name:        spec.Name,
		Description: spec.Description,
		Subjects:    subjects,
		Retention:   retention,
		Storage:     jetstream.FileStorage,
		Discard:     jetstream.DiscardOld,
		MaxAge:      spec.MaxAge,
		Duplicates:  spec.DuplicateWindow,
		Metadata:    map[string]string{managedKey: "1"},
	}
	s, err := js.Stream(ctx, spec.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s, err = js.CreateStream(ctx, want)
		if err != nil {
			return nil, fmt.Errorf("create stream %s over %v: %w", spec.Name, subjects, err)
		}
		log.Info("stream created", "stream", spec.Name, "subjects", subjects)
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up stream %s: %w", spec.Name, err)
	}
	have := s.CachedInfo().Config
	switch {
	case have.Metadata[managedKey] == "":
		return nil, fmt.Errorf("%w: stream %s exists but was not created by agent-worker (subjects %v); set nats.stream to another name", ErrStreamConflict, spec.Name, have.Subjects)
	case have.Retention != want.Retention:
		return nil, fmt.Errorf("%w: stream %s has retention %s, agent-worker needs %s; delete it or set nats.stream to another name", ErrStreamConflict, spec.Name, have.Retention, want.Retention)
	case have.Storage != want.Storage:
		return nil, fmt.Errorf("%w: stream %s has storage %s, agent-worker needs %s", ErrStreamConflict, spec.Name, have.Storage, want.Storage)
	}
	have.Subjects = slices.Sorted(slices.Values(have.Subjects))
	if slices.Equal(have.Subjects, want.Subjects) && have.Duplicates == want.Duplicates && have.MaxAge == want.MaxAge {
		return s, nil
	}
	upd := have
	upd.Subjects, upd.Duplicates, upd.MaxAge = want.Subjects, want.Duplicates, want.MaxAge
	s, err = js.UpdateStream(ctx, upd)
	if err != nil {
		return nil, fmt.Errorf("update stream %s to subjects %v: %w", spec.Name, subjects, err)
	}
	log.Info("stream updated", "stream", spec.Name, "subjects", subjects, "was", have.Subjects, "duplicate_window", want.Duplicates)
	return s, nil
}
