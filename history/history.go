// Package history is the agents' conversation memory: an ADK
// session.Service whose turns live in a store.Store, so history survives a
// restart, and which shows the model only the newest turns, so the prompt
// (and the per-turn cost) stays flat as an agent ages.
//
// It must not decide what a turn is: the driver says when a turn's events
// are kept (Commit) or thrown away (Discard).
package history

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"maps"
	"sync"
	"time"

	"google.golang.org/adk/session"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/outage"
	"github.com/agent-worker/agent-worker/store"
)

// Service keeps one conversation per (app, user, session) triple. Events
// appended during a turn are visible to the rest of that turn at once but
// reach the store only at Commit, as one record per turn; the store keeps
// the newest Window records and Get returns only those.
//
// Session state (session.State) is held in memory only: agent-worker keeps
// its durable state in the store directly.
type Service struct {
	store  store.Store
	window int
	mu     sync.Mutex
	convs  map[string]*conversation
}

var _ session.Service = (*Service)(nil)

// New returns a Service over st that keeps window turns (at least 1).
func New(st store.Store, window int) *Service {
	return &Service{store: st, window: max(window, 1), convs: map[string]*conversation{}}
}

type conversation struct {
	app, user, id string
	turns         [][]*session.Event // committed, newest last, at most window
	meta          []Turn             // each committed turn's number and messages (Input unset)
	pending       []*session.Event   // the turn in progress
	state         map[string]any
	updated       time.Time
}

// Turn is what the driver adds to a committed turn.
type Turn struct {
	// N is the turn's number, so a restarted worker counts on from it.
	N uint64
	// Messages are the ids of the messages the turn handled, so a
	// restarted worker recognises them if they are delivered again.
	Messages []string
	// Input, when set, is kept in place of the turn's prompt (the first
	// event the user authored): the driver's rendering with long message
	// bodies clipped, so a turn over a large batch stays recordable and
	// later turns do not carry its full text.
	Input *genai.Content
}

// MaxRecordBytes bounds one turn's record in the store (the NATS KV store
// refuses values above the server's max payload, 1 MiB by default). A
// turn whose record would be larger is kept with its longest texts and
// tool results clipped, marked as such; it is never failed for its size.
const MaxRecordBytes = 256 << 10

// turnRecord is what one turn looks like in the store: the parts of each
// event that shape what the model sees next (who said what, on which
// branch), not the transient response metadata.
type turnRecord struct {
	N        uint64        `json:"n,omitempty"`
	Messages []string      `json:"msgs,omitempty"`
	Events   []storedEvent `json:"events"`
}

type storedEvent struct {
	ID         string         `json:"id"`
	Invocation string         `json:"inv,omitempty"`
	Author     string         `json:"author"`
	Branch     string         `json:"branch,omitempty"`
	Time       time.Time      `json:"ts"`
	Content    *genai.Content `json:"content,omitempty"`
	StateDelta map[string]any `json:"state,omitempty"`
}

func encodeTurn(evs []*session.Event) turnRecord {
	rec := turnRecord{Events: make([]storedEvent, len(evs))}
	for i, e := range evs {
		rec.Events[i] = storedEvent{ID: e.ID, Invocation: e.InvocationID, Author: e.Author, Branch: e.Branch,
			Time: e.Timestamp, Content: e.Content, StateDelta: e.Actions.StateDelta}
	}
	return rec
}

func (r turnRecord) decode() []*session.Event {
	out := make([]*session.Event, len(r.Events))
	for i, e := range r.Events {
		ev := &session.Event{ID: e.ID, InvocationID: e.Invocation, Author: e.Author, Branch: e.Branch, Timestamp: e.Time}
		ev.Content = e.Content
		ev.Actions.StateDelta = e.StateDelta
		out[i] = ev
	}
	return out
}

func listKey(app, user, id string) string { return "history." + app + "." + user + "." + id }

func convKey(app, user, id string) string { return app + "\x00" + user + "\x00" + id }

// load returns the conversation, reading it from the store on first use.
// Callers hold mu. A conversation with nothing stored is reported as absent.
func (s *Service) load(ctx context.Context, app, user, id string) (*conversation, error) {
	if c, ok := s.convs[convKey(app, user, id)]; ok {
		return c, nil
	}
	raw, err := s.store.Tail(ctx, listKey(app, user, id), s.window)
	if err != nil {
		return nil, fmt.Errorf("load history of %s/%s: %w", user, id, outage.Mark("store", err))
	}
	if len(raw) == 0 {
		return nil, nil
	}
	c := &conversation{app: app, user: user, id: id, state: map[string]any{}}
	for i, r := range raw {
		var rec turnRecord
		if err := json.Unmarshal(r, &rec); err != nil {
			return nil, fmt.Errorf("load history of %s/%s: turn %d of %d: %w", user, id, i+1, len(raw), err)
		}
		evs := rec.decode()
		c.turns = append(c.turns, evs)
		c.meta = append(c.meta, Turn{N: rec.N, Messages: rec.Messages})
		if n := len(evs); n > 0 {
			c.updated = evs[n-1].Timestamp
		}
	}
	s.convs[convKey(app, user, id)] = c
	return c, nil
}

// Create starts an empty conversation; it fails if one exists.
func (s *Service) Create(ctx context.Context, req *session.CreateRequest) (*session.CreateResponse, error) {
	if req.AppName == "" || req.UserID == "" || req.SessionID == "" {
		return nil, fmt.Errorf("history: app, user and session id are required, got %q/%q/%q", req.AppName, req.UserID, req.SessionID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.load(ctx, req.AppName, req.UserID, req.SessionID)
	if err != nil {
		return nil, err
	}
	if c != nil {
		return nil, fmt.Errorf("history: session %s/%s already exists", req.UserID, req.SessionID)
	}
	c = &conversation{app: req.AppName, user: req.UserID, id: req.SessionID, state: maps.Clone(req.State)}
	if c.state == nil {
		c.state = map[string]any{}
	}
	s.convs[convKey(req.AppName, req.UserID, req.SessionID)] = c
	return &session.CreateResponse{Session: s.view(c)}, nil
}

// Get returns the conversation's newest Window turns plus the turn in
// progress. NumRecentEvents and After narrow it further.
func (s *Service) Get(ctx context.Context, req *session.GetRequest) (*session.GetResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.load(ctx, req.AppName, req.UserID, req.SessionID)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, fmt.Errorf("history: session %s/%s not found", req.UserID, req.SessionID)
	}
	v := s.view(c)
	if req.NumRecentEvents > 0 && len(v.events) > req.NumRecentEvents {
		v.events = v.events[len(v.events)-req.NumRecentEvents:]
	}
	if !req.After.IsZero() {
		i := 0
		for i < len(v.events) && v.events[i].Timestamp.Before(req.After) {
			i++
		}
		v.events = v.events[i:]
	}
	return &session.GetResponse{Session: v}, nil
}

// view is a snapshot of c that AppendEvent extends. Callers hold mu.
func (s *Service) view(c *conversation) *view {
	n := len(c.pending)
	for _, t := range c.turns {
		n += len(t)
	}
	evs := make([]*session.Event, 0, n)
	for _, t := range c.turns {
		evs = append(evs, t...)
	}
	evs = append(evs, c.pending...)
	return &view{conv: c, events: evs, state: c.state, updated: c.updated, mu: &s.mu}
}

// List returns the app's conversations that are loaded in this process.
func (s *Service) List(_ context.Context, req *session.ListRequest) (*session.ListResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []session.Session
	for _, c := range s.convs {
		if c.app == req.AppName && (req.UserID == "" || c.user == req.UserID) {
			out = append(out, &view{conv: c, state: c.state, updated: c.updated, mu: &s.mu})
		}
	}
	return &session.ListResponse{Sessions: out}, nil
}

// Delete forgets the conversation in memory. Stored turns age out of the
// store's bounded list; they are not erased.
func (s *Service) Delete(_ context.Context, req *session.DeleteRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.convs, convKey(req.AppName, req.UserID, req.SessionID))
	return nil
}

// AppendEvent adds ev to the turn in progress (partial events are
// ignored) and applies its state delta.
func (s *Service) AppendEvent(_ context.Context, sess session.Session, ev *session.Event) error {
	if ev == nil || ev.Partial {
		return nil
	}
	v, ok := sess.(*view)
	if !ok {
		return fmt.Errorf("history: foreign session type %T", sess)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := v.conv
	for k, val := range ev.Actions.StateDelta {
		if len(k) >= len(session.KeyPrefixTemp) && k[:len(session.KeyPrefixTemp)] == session.KeyPrefixTemp {
			continue
		}
		c.state[k] = val
	}
	c.pending = append(c.pending, ev)
	c.updated = ev.Timestamp
	v.events = append(v.events, ev)
	v.updated = ev.Timestamp
	return nil
}

// Commit stores the turn in progress as one record, with t's number,
// message ids and shortened input, and makes it part of the window as
// stored. A record above MaxRecordBytes is clipped to fit (see shrink).
// Committing with nothing pending is a no-op. On a store error the turn
// stays pending, so Commit may be retried; store errors are marked as an
// outage (package outage): a record that cannot be written is the store's
// fault, not the turn's.
func (s *Service) Commit(ctx context.Context, app, user, id string, t Turn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.convs[convKey(app, user, id)]
	if !ok || len(c.pending) == 0 {
		return nil
	}
	rec := encodeTurn(c.pending)
	rec.N, rec.Messages = t.N, t.Messages
	if t.Input != nil {
		for i := range rec.Events {
			if rec.Events[i].Author == "user" {
				rec.Events[i].Content = t.Input
				break
			}
		}
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("history: encode turn of %s/%s: %w", user, id, err)
	}
	if len(raw) > MaxRecordBytes {
		// Clip a copy: the events' contents are shared with the run.
		var cp turnRecord
		if err := json.Unmarshal(raw, &cp); err != nil {
			return fmt.Errorf("history: copy turn of %s/%s: %w", user, id, err)
		}
		if raw, err = shrink(&cp, MaxRecordBytes); err != nil {
			return fmt.Errorf("history: encode turn of %s/%s: %w", user, id, err)
		}
		rec = cp
	}
	if err := s.store.Append(ctx, listKey(app, user, id), raw, s.window); err != nil {
		return fmt.Errorf("history: store turn of %s/%s: %w", user, id, outage.Mark("store", err))
	}
	// The window holds the turn as stored, so the model sees the same
	// history whether or not the worker restarted since.
	c.turns = append(c.turns, rec.decode())
	c.meta = append(c.meta, Turn{N: t.N, Messages: t.Messages})
	if len(c.turns) > s.window {
		c.turns = append(c.turns[:0:0], c.turns[len(c.turns)-s.window:]...)
		c.meta = append(c.meta[:0:0], c.meta[len(c.meta)-s.window:]...)
	}
	c.pending = nil
	return nil
}

// Recent returns the committed turns in the window, oldest first, with
// their numbers and message ids (Input unset), loading them from the
// store if this process has not yet.
func (s *Service) Recent(ctx context.Context, app, user, id string) ([]Turn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.load(ctx, app, user, id)
	if err != nil || c == nil {
		return nil, err
	}
	return append([]Turn(nil), c.meta...), nil
}

// Discard forgets the turn in progress: a failed or interrupted turn
// leaves no trace in what the model sees next.
func (s *Service) Discard(app, user, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.convs[convKey(app, user, id)]; ok {
		c.pending = nil
	}
}

// Turns returns how many committed turns are in the window.
func (s *Service) Turns(app, user, id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.convs[convKey(app, user, id)]; ok {
		return len(c.turns)
	}
	return 0
}

// view is the session.Session the runner sees.
type view struct {
	conv    *conversation
	events  []*session.Event
	state   map[string]any
	updated time.Time
	mu      *sync.Mutex
}

func (v *view) ID() string                { return v.conv.id }
func (v *view) AppName() string           { return v.conv.app }
func (v *view) UserID() string            { return v.conv.user }
func (v *view) LastUpdateTime() time.Time { return v.updated }
func (v *view) State() session.State      { return stateView{v} }
func (v *view) Events() session.Events {
	v.mu.Lock()
	defer v.mu.Unlock()
	return eventList(append([]*session.Event(nil), v.events...))
}

type eventList []*session.Event

func (e eventList) Len() int { return len(e) }
func (e eventList) At(i int) *session.Event {
	if i < 0 || i >= len(e) {
		return nil
	}
	return e[i]
}
func (e eventList) All() iter.Seq[*session.Event] {
	return func(yield func(*session.Event) bool) {
		for _, ev := range e {
			if !yield(ev) {
				return
			}
		}
	}
}

type stateView struct{ v *view }

func (s stateView) Get(k string) (any, error) {
	s.v.mu.Lock()
	defer s.v.mu.Unlock()
	val, ok := s.v.state[k]
	if !ok {
		return nil, session.ErrStateKeyNotExist
	}
	return val, nil
}

func (s stateView) Set(k string, val any) error {
	s.v.mu.Lock()
	defer s.v.mu.Unlock()
	s.v.state[k] = val
	return nil
}

func (s stateView) All() iter.Seq2[string, any] {
	s.v.mu.Lock()
	c := maps.Clone(s.v.state)
	s.v.mu.Unlock()
	return maps.All(c)
}
