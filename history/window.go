package history

import (
	"context"
	"maps"

	"google.golang.org/adk/session"
)

// Snapshot is what the model sees of a conversation's committed turns,
// taken at one instant: the history a turn's first model call starts
// from.
type Snapshot struct {
	// Events are the window's turns, less those folded into the memory,
	// oldest first. They are shared with the Service and must not be
	// changed.
	Events []*session.Event
	// State is a copy of the session state.
	State map[string]any
	// Turns counts the committed turns Events hold.
	Turns int
}

// Window returns a Snapshot of the conversation for a reader outside its
// turns (an operator's ask). It never holds the turn in progress — no
// half-run turn, no tool call without its result — and a later Commit or
// Discard does not change it, so the reader neither sees nor races a
// running turn. A conversation with nothing stored is an empty Snapshot,
// not an error; the error is the store's, when the conversation had to be
// loaded from it.
func (s *Service) Window(ctx context.Context, app, user, id string) (Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.load(ctx, app, user, id)
	if err != nil || c == nil {
		return Snapshot{State: map[string]any{}}, err
	}
	shown := s.shown(c)
	snap := Snapshot{State: maps.Clone(c.state), Turns: len(shown)}
	if snap.State == nil {
		snap.State = map[string]any{}
	}
	for _, i := range shown {
		snap.Events = append(snap.Events, c.turns[i]...)
	}
	return snap, nil
}
