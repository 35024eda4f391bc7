package eventstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/natsbus"
)

// Defaults of Options.
const (
	DefaultMaxAge   = 7 * 24 * time.Hour
	DefaultMaxBytes = 256 << 20
	DefaultBuffer   = 8192
	// DefaultAckTimeout is how long a publish may wait for JetStream's
	// acknowledgement before it counts as failed.
	DefaultAckTimeout = 10 * time.Second
)

// maxPending is how many publishes may await their acknowledgement at
// once; beyond it Record waits (up to stallWait) while the buffer holds
// the events behind.
const (
	maxPending = 1024
	stallWait  = 5 * time.Second
)

// Options configure a Stream. Zero values take the documented defaults.
type Options struct {
	// Conn is the worker's NATS connection, with JetStream. Required.
	Conn *nats.Conn
	// Name is the stream's name. Required (the worker uses
	// <nats.stream>_EVENTS).
	Name string
	// Subjects gives the event subjects: <prefix>.<agent>.events.<type>.
	Subjects natsbus.Subjects
	// MaxAge is how long an event is kept (events.max_age). Default
	// DefaultMaxAge.
	MaxAge time.Duration
	// MaxBytes bounds the stream (events.max_bytes): beyond it the oldest
	// events are removed. Default DefaultMaxBytes.
	MaxBytes int64
	// Replicas is how many copies JetStream keeps (nats.replicas); zero
	// creates the stream with 1 and leaves an existing one's count.
	Replicas int
	// Replica names this replica (lease.holder); every event Record stores
	// carries it.
	Replica string
	// Buffer is how many events may wait to be published before new ones
	// are dropped (counted). Default DefaultBuffer.
	Buffer int
	// AckTimeout is how long a publish waits for its acknowledgement
	// before it counts as failed. Default DefaultAckTimeout.
	AckTimeout time.Duration
	Log        *slog.Logger // default: discard
}

// Stream is the durable events stream: Record stores a bus's events in
// it, Follow reads them back. Its methods are safe for concurrent use.
type Stream struct {
	o      Options
	js     jetstream.JetStream // management and reading
	stream jetstream.Stream
	log    *slog.Logger

	failed atomic.Uint64 // publishes not acknowledged, or events not encodable
	flog   rateLog       // logs failed publishes without flooding

	mu       sync.Mutex
	recorder *events.Subscription // the bus subscription Record takes events from
	overflow uint64               // dropped by recorders already stopped

	publishing func(events.Event) // tests: called by Record before each publish
}

// errCodeSubjectOverlap is JetStream's error code for subjects another
// stream holds.
const errCodeSubjectOverlap jetstream.ErrorCode = 10065

// ErrSubjectsTaken: another stream already captures the event subjects.
var ErrSubjectsTaken = errors.New("the event subjects are captured by another stream")

// Open creates the stream, or brings the one agent-worker created before
// up to date (subjects, limits, replicas: natsbus.EnsureStream), and
// returns it. It refuses a stream of that name agent-worker did not
// create, one with another retention (natsbus.ErrStreamConflict), and
// subjects another stream already captures (ErrSubjectsTaken): JetStream
// lets no two streams hold one subject.
func Open(ctx context.Context, o Options) (*Stream, error) {
	if o.Conn == nil || o.Name == "" {
		return nil, errors.New("eventstream: a NATS connection and a stream name are required")
	}
	if o.Subjects.Prefix == "" {
		o.Subjects.Prefix = "agents"
	}
	if o.MaxAge <= 0 {
		o.MaxAge = DefaultMaxAge
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Buffer <= 0 {
		o.Buffer = DefaultBuffer
	}
	if o.AckTimeout <= 0 {
		o.AckTimeout = DefaultAckTimeout
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	js, err := jetstream.New(o.Conn)
	if err != nil {
		return nil, fmt.Errorf("events stream %s: %w", o.Name, err)
	}
	s := &Stream{o: o, js: js, log: o.Log, flog: rateLog{every: 10 * time.Second}}
	spec := natsbus.StreamSpec{
		Name: o.Name, Subjects: []string{s.allSubjects()}, Limits: true,
		MaxAge: o.MaxAge, MaxBytes: o.MaxBytes, Replicas: o.Replicas,
		// No message ids are sent; a window JetStream accepts for any age.
		DuplicateWindow: min(2*time.Minute, o.MaxAge),
		Description:     "agent-worker: the agents' events",
	}
	s.stream, err = natsbus.EnsureStream(ctx, js, spec, o.Log)
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeSubjectOverlap {
			return nil, fmt.Errorf("%w: %s is captured by another stream; delete that stream (the worker keeps the events in %s now) or set nats.subject_prefix: %w",
				ErrSubjectsTaken, s.allSubjects(), o.Name, err)
		}
		return nil, err
	}
	return s, nil
}

// Name is the stream's name.
func (s *Stream) Name() string { return s.o.Name }

// allSubjects matches every agent's event subjects.
func (s *Stream) allSubjects() string { return s.o.Subjects.Prefix + ".*.events.>" }

// agentSubjects matches one agent's event subjects.
func (s *Stream) agentSubjects(agent string) string {
	return s.o.Subjects.Prefix + "." + token(agent) + ".events.>"
}

// token makes s one subject token: dots, wildcards and whitespace, which
// would change the subject's shape, become "_", and so does an empty s.
// Agent names and event types are tokens already; this guards the rest.
func token(s string) string {
	if s == "" {
		return "_"
	}
	if !strings.ContainsAny(s, ".*> \t\r\n") {
		return s
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '.', '*', '>', ' ', '\t', '\r', '\n':
			return '_'
		}
		return r
	}, s)
}

// rateLog lets one warning through per interval and counts the ones it
// held back, so an outage is logged without a line per event.
type rateLog struct {
	every time.Duration

	mu     sync.Mutex
	last   time.Time
	held   uint64
	logged bool
}

// allow reports whether to log now, and how many were held back since the
// last line.
func (r *rateLog) allow(now time.Time) (bool, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.logged && now.Sub(r.last) < r.every {
		r.held++
		return false, 0
	}
	held := r.held
	r.logged, r.last, r.held = true, now, 0
	return true, held
}
