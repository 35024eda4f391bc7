package natskv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/store"
)

// DefaultBucket is the bucket name prefix Open uses when Options.Bucket is
// empty.
const DefaultBucket = "agent-worker"

// markerTTL is how long the state bucket keeps the marker a deleted or
// expired key leaves behind (LimitMarkerTTL), so watchers see the removal.
// Markers are not needed for correctness: Create succeeds over a marker and
// over nothing alike.
const markerTTL = time.Minute

// Options configure Open. The zero value is usable.
type Options struct {
	// Bucket prefixes the two bucket names, <Bucket>-state and
	// <Bucket>-lists; [A-Za-z0-9_-] only. Empty means DefaultBucket.
	// Workers that share a bucket share their state.
	Bucket string
	// Replicas is the number of copies the JetStream cluster keeps of each
	// bucket, each on another server (1, 3 or 5; nats.replicas). Zero
	// means 1. Changing it on an existing bucket updates the bucket in
	// place, keeping its contents, and is logged.
	//
	// With 3 the state survives losing any one of the three servers (with
	// 5, any two): a write returns only once a majority of the copies
	// stored it, so no acknowledged write is lost with a server, and the
	// copies left elect a new leader and keep serving reads and writes,
	// Create and Update staying atomic. Losing a majority makes the store
	// fail (and the worker not ready) until servers are back; nothing
	// acknowledged is lost. With 1 the state is on one server and
	// unavailable while it is down.
	Replicas int
	// Storage is where the server keeps the buckets. The zero value is
	// jetstream.FileStorage: state survives a server restart.
	// jetstream.MemoryStorage does not.
	Storage jetstream.StorageType
	// Log receives the store's warnings (a list keep beyond MaxListItems, a
	// failed list trim). Nil discards them.
	Log *slog.Logger
}

// Store is a store.Store over two JetStream KV buckets. It is safe for
// concurrent use, by several goroutines and by several processes opening
// the same buckets: Create and Update are atomic on the server.
type Store struct {
	js         jetstream.JetStream
	state      jetstream.KeyValue
	stateSubj  string // subject prefix of the state bucket's keys
	lists      jetstream.KeyValue
	listStream jetstream.Stream // the lists bucket's stream, for trims
	listSubj   string           // subject prefix of the lists bucket's keys
	nc         *nats.Conn       // for direct gets of a list's items
	maxPayload func() int64
	log        *slog.Logger
	closed     atomic.Bool
	keepWarned sync.Once
	// mirrors are the fences claimed in the lists bucket (fence.go), by
	// fence key: the newest seen, and its mirror's sequence there.
	mirrorsMu sync.Mutex
	mirrors   map[string]mirror
}

var _ store.Store = (*Store)(nil)

var validBucket = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// Open creates the store's buckets, or updates them to opts, and returns a
// Store over them. It is idempotent: opening existing buckets keeps their
// contents, so a restarted worker finds its state. js's connection stays
// the caller's: Store.Close does not close it.
func Open(ctx context.Context, js jetstream.JetStream, opts Options) (*Store, error) {
	if opts.Bucket == "" {
		opts.Bucket = DefaultBucket
	}
	if !validBucket.MatchString(opts.Bucket) {
		return nil, fmt.Errorf("natskv: open: bucket %q: want [A-Za-z0-9_-]+", opts.Bucket)
	}
	if opts.Replicas < 0 {
		return nil, fmt.Errorf("natskv: open: replicas must not be negative; got %d", opts.Replicas)
	}
	if opts.Replicas == 0 {
		opts.Replicas = 1
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	stateName, listsName := opts.Bucket+"-state", opts.Bucket+"-lists"

	state, err := openBucket(ctx, js, log, jetstream.KeyValueConfig{
		Bucket:      stateName,
		Description: "agent-worker state: spend, halts, pauses, wake times, claims, leases",
		History:     1,
		Replicas:    opts.Replicas,
		Storage:     opts.Storage,
		// Setting it enables per-message TTLs, which Create's ttl needs.
		LimitMarkerTTL: markerTTL,
	})
	if err != nil {
		return nil, wrap(ctx, "open bucket", stateName, err)
	}
	lists, err := openBucket(ctx, js, log, jetstream.KeyValueConfig{
		Bucket:      listsName,
		Description: "agent-worker lists: conversation history, newest items per list",
		History:     MaxListItems,
		Replicas:    opts.Replicas,
		Storage:     opts.Storage,
	})
	if err != nil {
		return nil, wrap(ctx, "open bucket", listsName, err)
	}
	listStream, err := js.Stream(ctx, "KV_"+listsName)
	if err != nil {
		return nil, wrap(ctx, "open bucket", listsName, err)
	}
	s := &Store{
		js:         js,
		state:      state,
		stateSubj:  "$KV." + stateName + ".",
		mirrors:    map[string]mirror{},
		lists:      lists,
		listStream: listStream,
		listSubj:   "$KV." + listsName + ".",
		maxPayload: func() int64 { return 0 },
		log:        log.With("store", "natskv", "bucket", opts.Bucket),
	}
	if nc := js.Conn(); nc != nil {
		s.maxPayload = nc.MaxPayload
		s.nc = nc
	}
	return s, nil
}

// openBucket creates cfg's bucket or updates it to cfg, logging a change
// of its replica count (the server adds or drops copies in place).
func openBucket(ctx context.Context, js jetstream.JetStream, log *slog.Logger, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	was := 0
	if st, err := js.Stream(ctx, "KV_"+cfg.Bucket); err == nil {
		was = st.CachedInfo().Config.Replicas
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, cfg)
	if err != nil {
		if hint := replicasHint(err, cfg.Replicas); hint != "" {
			err = fmt.Errorf("%w%s", err, hint)
		}
		return nil, err
	}
	if was != 0 && was != cfg.Replicas {
		log.Info("bucket replicas changed", "store", "natskv", "bucket", cfg.Bucket, "replicas", cfg.Replicas, "was", was)
	}
	return kv, nil
}

// replicasHint explains err when it is JetStream refusing replicas copies:
// the server is not clustered, or the cluster has too few servers (with
// room). Otherwise it is empty.
func replicasHint(err error, replicas int) string {
	var apiErr *jetstream.APIError
	if replicas <= 1 || !errors.As(err, &apiErr) {
		return ""
	}
	switch apiErr.ErrorCode {
	case 10074: // replicas > 1 not supported in non-clustered mode
		return fmt.Sprintf(" (%d replicas need a JetStream cluster of at least %d servers; this server is not clustered)", replicas, replicas)
	case 10005, 10023: // no suitable peers for placement; insufficient resources
		return fmt.Sprintf(" (%d replicas need at least %d JetStream servers up in the cluster, each with room for a copy)", replicas, replicas)
	}
	return ""
}

// Close makes every later call return store.ErrClosed. It does not close
// the NATS connection, and it neither waits for nor cancels calls already
// running. Closing twice is not an error.
func (s *Store) Close() error {
	s.closed.Store(true)
	return nil
}

// begin is every method's entry check: closed store, done context, bad key.
func (s *Store) begin(ctx context.Context, op, key string) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("natskv: %s %q: %w", op, key, err)
	}
	if !store.ValidKey(key) {
		return fmt.Errorf("natskv: %s %q: %w", op, key, store.ErrInvalidKey)
	}
	return nil
}

// wrap says what was being done. A done context wins over whatever error
// the client made of it, so callers can match context.Canceled and
// context.DeadlineExceeded.
func wrap(ctx context.Context, op, key string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("natskv: %s %q: %w", op, key, cerr)
	}
	return fmt.Errorf("natskv: %s %q: %w", op, key, err)
}

// wrapWrite is wrap for a write of value, naming the sizes when the value
// did not fit in a NATS message.
func (s *Store) wrapWrite(ctx context.Context, op, key string, value []byte, err error) error {
	if errors.Is(err, nats.ErrMaxPayload) {
		return wrap(ctx, op, key, fmt.Errorf("value of %d bytes (plus headers) exceeds the server's max_payload of %d bytes: %w",
			len(value), s.maxPayload(), err))
	}
	return wrap(ctx, op, key, err)
}

// wrongLastSequence reports whether err is the server refusing a write
// whose expected last revision of the key did not match: 10071, or 10164
// from replicated streams.
func wrongLastSequence(err error) bool {
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
