package natsbus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/natsbus/subject"
)

// StreamSpec is the stream the worker needs.
type StreamSpec struct {
	Name string
	// Subjects are the agents' inbox and deferred wildcards plus every
	// subject an agent binds.
	Subjects        []string
	DuplicateWindow time.Duration
	// MaxAge bounds how long a message is kept. Zero: 7 days; negative:
	// no maximum age.
	MaxAge time.Duration
	// WorkQueue makes a work-queue stream (each message is removed once
	// one consumer acks it; consumers' filters must not overlap) instead
	// of the agents' input stream's interest retention. The subagent jobs
	// and charges stream is one.
	WorkQueue bool
	// Limits makes a limits-based stream instead: a message stays until
	// MaxAge or MaxBytes removes it, oldest first, whoever read it. The
	// events stream (package eventstream) is one. Not with WorkQueue.
	Limits bool
	// MaxBytes bounds the stream's size: beyond it the oldest messages are
	// removed (with DiscardNew: new ones are refused). Zero: unlimited.
	MaxBytes int64
	// MaxMsgsPerSubject bounds the messages kept per subject (zero:
	// unlimited); with DiscardNew a subject at the bound refuses new
	// messages — its publisher gets an error — while other subjects
	// still take theirs.
	MaxMsgsPerSubject int64
	// DiscardNew refuses new messages when MaxBytes or MaxMsgsPerSubject
	// is reached, instead of removing the oldest: nothing unhandled is
	// removed to make room. Only with Limits.
	DiscardNew bool
	// AllowDirect lets any server with a copy answer direct gets
	// (DirectBatch), so reading the log does not go through the leader.
	AllowDirect bool
	// Description is the stream's description. Default: the input
	// stream's.
	Description string
	// Replicas is how many copies JetStream keeps of the stream, each on
	// another server of the cluster (nats.replicas): 1, 3 or 5. Zero
	// creates the stream with 1 and leaves an existing stream's count as
	// it is.
	//
	// With 3 the stream survives losing any one of its three servers (with
	// 5, any two of five): JetStream acks a publish only once a majority of
	// the copies stored it, so an acked message is not lost with the server
	// that took it, and the copies left elect a new leader, so the stream
	// stays readable and writable, its consumers (which keep as many copies
	// as the stream) with their acks and redelivery state. Losing a
	// majority (two of three) stops the stream, but loses nothing acked,
	// until enough servers are back. With 1 the stream lives on one server:
	// while it is down the agents get no input.
	Replicas int
	// MaxConsumers is the stream's consumer limit. Zero creates the
	// stream without one (the server's default per stream applies,
	// nats-server's 1,000) and leaves an existing stream's as it is.
	MaxConsumers int
}

// managedKey marks, in the stream's metadata, a stream agent-worker
// created; a stream without it is never changed.
const managedKey = "agent-worker"

// ErrStreamConflict: a stream of that name exists and cannot be used as
// it is.
var ErrStreamConflict = errors.New("stream conflict")

// EnsureStream creates the stream or brings an existing one, created by
// agent-worker, up to date (subjects, duplicate window, max age, and the
// number of replicas when spec.Replicas is set: JetStream adds or drops
// copies in place, keeping the messages, and the change is logged). A stream
// of the same name that agent-worker did not create, or whose retention or
// storage differ (which JetStream cannot change in place), is an error
// wrapping ErrStreamConflict that says what differs; nothing is changed.
//
// A spec with Limits keeps messages until they are purged or a limit
// removes (or, with DiscardNew, refuses) them: the agents' input stream is
// one, a log its readers purge below their cursors (package natsinbox).
// One with WorkQueue uses work-queue retention: a message is removed once
// one consumer acked it. Neither: interest retention, a message is
// removed once every consumer it is for acked it (the input stream's
// layout before the log; natsinbox converts it).
func EnsureStream(ctx context.Context, js jetstream.JetStream, spec StreamSpec, log *slog.Logger) (jetstream.Stream, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	want, err := streamConfig(spec)
	if err != nil {
		return nil, err
	}
	s, err := js.Stream(ctx, spec.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s, err = js.CreateStream(ctx, want)
		if err != nil {
			return nil, fmt.Errorf("create stream %s over %v%s: %w", spec.Name, want.Subjects, replicasHint(err, want.Replicas), err)
		}
		log.Info("stream created", "stream", spec.Name, "subjects", want.Subjects, "replicas", want.Replicas, "max_consumers", want.MaxConsumers)
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up stream %s: %w", spec.Name, err)
	}
	return updateStream(ctx, js, s, spec, want, log)
}

// streamConfig is the configuration spec asks for, with its defaults
// applied, or an error when spec contradicts itself.
func streamConfig(spec StreamSpec) (jetstream.StreamConfig, error) {
	switch {
	case spec.MaxAge == 0:
		spec.MaxAge = 7 * 24 * time.Hour
	case spec.MaxAge < 0:
		spec.MaxAge = 0 // JetStream's "no maximum age"
	}
	if spec.Description == "" {
		spec.Description = "agent-worker: agents' inbox and deferred input"
	}
	if spec.Replicas < 0 {
		return jetstream.StreamConfig{}, fmt.Errorf("stream %s: replicas must not be negative; got %d", spec.Name, spec.Replicas)
	}
	retention, err := retentionOf(spec)
	if err != nil {
		return jetstream.StreamConfig{}, err
	}
	discard := jetstream.DiscardOld
	if spec.DiscardNew {
		discard = jetstream.DiscardNew
	}
	maxPerSubject := spec.MaxMsgsPerSubject
	if maxPerSubject <= 0 {
		maxPerSubject = -1
	}
	maxBytes := spec.MaxBytes
	if maxBytes <= 0 {
		maxBytes = -1 // JetStream's "unlimited"
	}
	// Patterns another one covers go (agents may bind alerts.> and
	// alerts.prod.>); a stream's subjects may not overlap.
	subjects, err := subject.Cover(slices.Sorted(slices.Values(spec.Subjects)))
	if err != nil {
		return jetstream.StreamConfig{}, fmt.Errorf("stream %s: %w", spec.Name, err)
	}
	want := jetstream.StreamConfig{
		Name:        spec.Name,
		Description: spec.Description,
		Subjects:    subjects,
		Retention:   retention,
		Storage:     jetstream.FileStorage,
		Discard:     discard,
		MaxAge:      spec.MaxAge,
		MaxBytes:    maxBytes,
		Duplicates:  spec.DuplicateWindow,
		Replicas:    max(spec.Replicas, 1),
		Metadata:    map[string]string{managedKey: "1"},

		MaxMsgsPerSubject:    maxPerSubject,
		DiscardNewPerSubject: spec.DiscardNew && maxPerSubject > 0,
		AllowDirect:          spec.AllowDirect,
	}
	if spec.MaxConsumers > 0 {
		want.MaxConsumers = spec.MaxConsumers
	}
	return want, nil
}

// retentionOf is the retention policy spec asks for: interest, work
// queue or limits.
func retentionOf(spec StreamSpec) (jetstream.RetentionPolicy, error) {
	retention := jetstream.InterestPolicy
	switch {
	case spec.WorkQueue && spec.Limits:
		return 0, fmt.Errorf("stream %s: a stream is either a work queue or limits-based", spec.Name)
	case spec.WorkQueue:
		retention = jetstream.WorkQueuePolicy
	case spec.Limits:
		retention = jetstream.LimitsPolicy
	case spec.DiscardNew:
		return 0, fmt.Errorf("stream %s: discarding new messages needs a limits-based stream", spec.Name)
	}
	return retention, nil
}

// updateStream brings s, the existing stream of spec, up to want, or
// refuses with an error wrapping ErrStreamConflict when it cannot.
func updateStream(ctx context.Context, js jetstream.JetStream, s jetstream.Stream, spec StreamSpec, want jetstream.StreamConfig, log *slog.Logger) (jetstream.Stream, error) {
	have := s.CachedInfo().Config
	if err := streamConflict(spec.Name, have, want); err != nil {
		return nil, err
	}
	have.Subjects = slices.Sorted(slices.Values(have.Subjects))
	if spec.Replicas == 0 {
		want.Replicas = have.Replicas // zero: keep the count it has
	}
	if spec.MaxConsumers <= 0 {
		want.MaxConsumers = have.MaxConsumers // zero: keep the limit it has
	}
	if spec.DuplicateWindow == 0 {
		want.Duplicates = have.Duplicates // zero: the server's default, as it has it
	}
	sameReplicas := have.Replicas == want.Replicas
	sameRest := slices.Equal(have.Subjects, want.Subjects) && have.Duplicates == want.Duplicates && have.MaxAge == want.MaxAge &&
		have.MaxBytes == want.MaxBytes && have.MaxConsumers == want.MaxConsumers && have.Discard == want.Discard &&
		have.MaxMsgsPerSubject == want.MaxMsgsPerSubject && have.DiscardNewPerSubject == want.DiscardNewPerSubject && have.AllowDirect == want.AllowDirect
	if sameRest && sameReplicas {
		return s, nil
	}
	upd := have
	upd.Subjects, upd.Duplicates, upd.MaxAge, upd.Replicas = want.Subjects, want.Duplicates, want.MaxAge, want.Replicas
	upd.MaxBytes, upd.MaxConsumers = want.MaxBytes, want.MaxConsumers
	upd.Discard, upd.MaxMsgsPerSubject, upd.DiscardNewPerSubject, upd.AllowDirect = want.Discard, want.MaxMsgsPerSubject, want.DiscardNewPerSubject, want.AllowDirect
	s, err := js.UpdateStream(ctx, upd)
	if err != nil {
		return nil, fmt.Errorf("update stream %s to subjects %v, %d replicas%s: %w", spec.Name, want.Subjects, want.Replicas, replicasHint(err, want.Replicas), err)
	}
	if !sameReplicas {
		// New copies catch up from the others in the background; the
		// stream keeps serving meanwhile.
		log.Info("stream replicas changed", "stream", spec.Name, "replicas", want.Replicas, "was", have.Replicas)
	}
	if !sameRest {
		log.Info("stream updated", "stream", spec.Name, "subjects", want.Subjects, "was", have.Subjects, "duplicate_window", want.Duplicates,
			"max_age", want.MaxAge, "max_bytes", want.MaxBytes, "max_consumers", want.MaxConsumers,
			"max_msgs_per_subject", want.MaxMsgsPerSubject, "discard", want.Discard.String(), "allow_direct", want.AllowDirect)
	}
	return s, nil
}

// streamConflict is an error wrapping ErrStreamConflict when the stream
// name, as it is (have), cannot be brought to want: agent-worker did not
// create it, or its retention or storage differ.
func streamConflict(name string, have, want jetstream.StreamConfig) error {
	switch {
	case have.Metadata[managedKey] == "":
		return fmt.Errorf("%w: stream %s exists but was not created by agent-worker (subjects %v); set nats.stream to another name", ErrStreamConflict, name, have.Subjects)
	case have.Retention != want.Retention:
		return fmt.Errorf("%w: stream %s has retention %s, agent-worker needs %s; delete it or set nats.stream to another name", ErrStreamConflict, name, have.Retention, want.Retention)
	case have.Storage != want.Storage:
		return fmt.Errorf("%w: stream %s has storage %s, agent-worker needs %s", ErrStreamConflict, name, have.Storage, want.Storage)
	}
	return nil
}

// JetStream's error codes for a replica count the servers cannot hold.
const (
	errCodeNoPeers               jetstream.ErrorCode = 10005 // no suitable peers for placement
	errCodeInsufficientResources jetstream.ErrorCode = 10023
	errCodeReplicasNotSupported  jetstream.ErrorCode = 10074 // replicas > 1 in non-clustered mode
)

// replicasHint explains err when it is JetStream refusing replicas copies:
// the server is not clustered, or the cluster has too few servers (with
// room). Otherwise it is empty.
func replicasHint(err error, replicas int) string {
	var apiErr *jetstream.APIError
	if replicas <= 1 || !errors.As(err, &apiErr) {
		return ""
	}
	switch apiErr.ErrorCode {
	case errCodeReplicasNotSupported:
		return fmt.Sprintf(" (nats.replicas is %d, but the NATS server is not part of a JetStream cluster; point nats.url at a cluster of at least %d servers or set nats.replicas to 1)", replicas, replicas)
	case errCodeNoPeers, errCodeInsufficientResources:
		return fmt.Sprintf(" (nats.replicas is %d: the JetStream cluster needs at least %d servers up, each with room for a copy)", replicas, replicas)
	}
	return ""
}
