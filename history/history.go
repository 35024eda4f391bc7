// Package history is the agents' conversation memory: an ADK
// session.Service whose turns live in a store.Store, so history survives a
// restart, and which shows the model only the newest turns, so the prompt
// (and the per-turn cost) stays flat as an agent ages.
//
// With KeepUntilFolded, a turn that leaves the window is not deleted at
// once: it stays in the store until the agent's memory has taken it in
// (Folded), so a summary that fails loses nothing (see package memory).
//
// It must not decide what a turn is: the driver says when a turn's events
// are kept (Commit) or thrown away (Discard). Nor does it summarise.
package history

import (
	"context"
	"encoding/json"
	"errors"
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
	// hold: turns leaving the window stay until folded (KeepUntilFolded).
	hold    bool
	dropped func(app, user, id string, turns []uint64)
	// folded is each conversation's watermark: its turns numbered up to
	// it are in the memory (Folded). Kept apart from convs, so it may be
	// set before the conversation is loaded.
	folded map[string]uint64
}

var _ session.Service = (*Service)(nil)

// Option configures a Service.
type Option func(*Service)

// MaxStoredTurns bounds how many turn records a conversation keeps in the
// store, window and unfolded turns together: the NATS KV store keeps 64
// items of a list (natskv.MaxListItems), and every backend is held to the
// same bound so that they behave alike.
const MaxStoredTurns = 64

// KeepUntilFolded keeps the turns that leave the window in the store (and
// in Unfolded) until Folded says the memory holds them; only then does a
// later Commit trim them. The model never sees them again either way: Get
// shows the window alone.
//
// The store keeps at most MaxStoredTurns records: when the window and the
// unfolded turns would exceed it (summaries have failed for that many
// turns), Commit trims the oldest unfolded turns after all and reports
// their numbers to dropped (which must not call back into the Service),
// so the loss is never silent.
func KeepUntilFolded(dropped func(app, user, id string, turns []uint64)) Option {
	return func(s *Service) { s.hold, s.dropped = true, dropped }
}

// New returns a Service over st that shows window turns (at least 1) and,
// without KeepUntilFolded, keeps only those.
func New(st store.Store, window int, opts ...Option) *Service {
	s := &Service{store: st, window: max(window, 1), convs: map[string]*conversation{}, folded: map[string]uint64{}}
	for _, o := range opts {
		o(s)
	}
	if s.hold {
		s.window = min(s.window, MaxStoredTurns)
	}
	return s
}

type conversation struct {
	app, user, id string
	// turns are the committed turns as stored, newest last: the window
	// and, with hold, older turns not yet folded.
	turns   [][]*session.Event
	meta    []Turn           // each committed turn's number and messages (Input unset)
	pending []*session.Event // the turn in progress
	// live is the session the turn in progress appends to (the runner's),
	// so Inject reaches the rest of the turn; nil between turns.
	live    *view
	state   map[string]any
	updated time.Time
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
	// Cursors are the agent's positions in its input log after the turn
	// (inbox.Cursors): stored in the same record, the same write, as the
	// turn, so a crash keeps both or neither.
	Cursors map[string]uint64
	// Fence is the fence of the agent's lease the turn ran under (zero:
	// none): the record is written under it, so a turn whose lease moved
	// while it ran records nothing (Commit returns store.ErrFenced).
	Fence store.Fence
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
	N        uint64            `json:"n,omitempty"`
	Messages []string          `json:"msgs,omitempty"`
	Cursors  map[string]uint64 `json:"cursors,omitempty"`
	Events   []storedEvent     `json:"events"`
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
	raw, err := s.store.Tail(ctx, listKey(app, user, id), s.stored())
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
		c.meta = append(c.meta, Turn{N: rec.N, Messages: rec.Messages, Cursors: rec.Cursors})
		if n := len(evs); n > 0 {
			c.updated = evs[n-1].Timestamp
		}
	}
	s.convs[convKey(app, user, id)] = c
	return c, nil
}

// stored is how many records a conversation may hold in the store.
func (s *Service) stored() int {
	if s.hold {
		return MaxStoredTurns
	}
	return s.window
}

// shown returns the indexes of c's turns the model sees: the newest
// window, less those already folded into the memory (a forced fold takes
// in the window too). Callers hold mu.
func (s *Service) shown(c *conversation) []int {
	mark := s.folded[convKey(c.app, c.user, c.id)]
	var out []int
	for i := max(len(c.turns)-s.window, 0); i < len(c.turns); i++ {
		if n := c.meta[i].N; n == 0 || n > mark {
			out = append(out, i)
		}
	}
	return out
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
	shown := s.shown(c)
	n := len(c.pending)
	for _, i := range shown {
		n += len(c.turns[i])
	}
	evs := make([]*session.Event, 0, n)
	for _, i := range shown {
		evs = append(evs, c.turns[i]...)
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

// Delete forgets the conversation in memory, so the next use reads it
// from the store again (a replica that owned the agent before must not
// build on what it held then). Stored turns age out of the store's
// bounded list; they are not erased.
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
	c.live = v
	c.updated = ev.Timestamp
	v.events = append(v.events, ev)
	v.updated = ev.Timestamp
	return nil
}

// Commit stores the turn in progress as one record, with t's number,
// message ids and shortened input, and makes it part of the window as
// stored. A record above MaxRecordBytes is clipped to fit (see shrink).
// Committing with nothing pending is a no-op. On a store error the turn
// stays pending, so Commit may be retried; under a fence that moved
// (store.ErrFenced, the lease went while the turn ran) nothing is stored
// and the turn stays pending for the caller to Discard; store errors are marked as an
// outage (package outage): a record that cannot be written is the store's
// fault, not the turn's.
//
// The store keeps the window; with KeepUntilFolded also the older turns
// not yet folded (up to MaxStoredTurns in all; see KeepUntilFolded), and
// folded turns outside the window are trimmed now.
func (s *Service) Commit(ctx context.Context, app, user, id string, t Turn) error {
	var lost []uint64
	defer func() {
		if len(lost) > 0 && s.dropped != nil {
			s.dropped(app, user, id, lost)
		}
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.convs[convKey(app, user, id)]
	if !ok || len(c.pending) == 0 {
		return nil
	}
	rec := encodeTurn(c.pending)
	rec.N, rec.Messages, rec.Cursors = t.N, t.Messages, t.Cursors
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
	// What the store keeps after this turn: the newest from, onwards.
	total := len(c.turns) + 1
	from := max(total-s.window, 0)
	if s.hold {
		// Older turns stay from the oldest not yet folded: folding goes
		// oldest first, so the folded ones are a prefix.
		mark := s.folded[convKey(app, user, id)]
		first := from
		for i := from - 1; i >= 0; i-- {
			if n := c.meta[i].N; n != 0 && n > mark {
				first = i
			}
		}
		from = max(first, total-MaxStoredTurns)
		for i := first; i < from; i++ {
			lost = append(lost, c.meta[i].N)
		}
	}
	if err := store.Under(s.store, t.Fence).Append(ctx, listKey(app, user, id), raw, total-from); err != nil {
		lost = nil
		if errors.Is(err, store.ErrFenced) {
			return fmt.Errorf("history: store turn of %s/%s: %w", user, id, err) // not an outage: the lease moved
		}
		return fmt.Errorf("history: store turn of %s/%s: %w", user, id, outage.Mark("store", err))
	}
	// The window holds the turn as stored, so the model sees the same
	// history whether or not the worker restarted since.
	c.turns = append(c.turns, rec.decode())
	c.meta = append(c.meta, Turn{N: t.N, Messages: t.Messages, Cursors: t.Cursors})
	if from > 0 {
		c.turns = append(c.turns[:0:0], c.turns[from:]...)
		c.meta = append(c.meta[:0:0], c.meta[from:]...)
	}
	c.pending, c.live = nil, nil
	return nil
}

// Held is a committed turn as the memory folds it: its number, when it
// ended, and its events as stored (texts of oversized turns clipped).
type Held struct {
	N      uint64
	At     time.Time
	Events []*session.Event
}

// Unfolded returns the committed turns not yet folded into the memory,
// oldest first: those that have left the window or, with all, every one
// (a forced fold). Turns of an older version without a number are never
// returned: no watermark can mark them folded. The events are shared with
// the Service and must not be changed. Without KeepUntilFolded only the
// window is held, so only all finds anything.
func (s *Service) Unfolded(ctx context.Context, app, user, id string, all bool) ([]Held, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.load(ctx, app, user, id)
	if err != nil || c == nil {
		return nil, err
	}
	mark := s.folded[convKey(app, user, id)]
	end := max(len(c.turns)-s.window, 0)
	if all {
		end = len(c.turns)
	}
	var out []Held
	for i := 0; i < end; i++ {
		if n := c.meta[i].N; n != 0 && n > mark {
			h := Held{N: n, Events: append([]*session.Event(nil), c.turns[i]...)}
			if k := len(c.turns[i]); k > 0 {
				h.At = c.turns[i][k-1].Timestamp
			}
			out = append(out, h)
		}
	}
	return out, nil
}

// Folded records that the memory holds every turn numbered up to through:
// they leave Unfolded and the model's view at once, and the store at the
// next Commit (those in the window when they leave it). The watermark only
// rises; it is not stored here (the memory's record holds it) and may be
// set before the conversation is loaded.
func (s *Service) Folded(app, user, id string, through uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := convKey(app, user, id)
	s.folded[k] = max(s.folded[k], through)
}

// Recent returns the committed turns held (the window and, with
// KeepUntilFolded, the older turns not yet folded), oldest first, with
// their numbers, message ids and cursors (Input unset), loading them from
// the store if this process has not yet.
func (s *Service) Recent(ctx context.Context, app, user, id string) ([]Turn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.load(ctx, app, user, id)
	if err != nil || c == nil {
		return nil, err
	}
	return append([]Turn(nil), c.meta...), nil
}

// Inject adds ev to the turn in progress from outside the runner (an
// operator's message steered into a running turn): the session the turn
// appends to sees it at once, so every later model call of the turn
// shows it, and Commit stores it with the turn's other events. With no
// turn in progress (nothing appended since the last Commit or Discard) it
// adds nothing and reports false.
func (s *Service) Inject(app, user, id string, ev *session.Event) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.convs[convKey(app, user, id)]
	if !ok || c.live == nil {
		return false
	}
	c.pending = append(c.pending, ev)
	c.updated = ev.Timestamp
	c.live.events = append(c.live.events, ev)
	c.live.updated = ev.Timestamp
	return true
}

// Discard forgets the turn in progress: a failed or interrupted turn
// leaves no trace in what the model sees next.
func (s *Service) Discard(app, user, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.convs[convKey(app, user, id)]; ok {
		c.pending, c.live = nil, nil
	}
}

// Turns returns how many committed turns the model sees: those in the
// window not folded into the memory.
func (s *Service) Turns(app, user, id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.convs[convKey(app, user, id)]; ok {
		return len(s.shown(c))
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
