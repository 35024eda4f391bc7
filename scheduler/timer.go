package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agent-worker/agent-worker/store"
)

// timerRecord is an agent's pending timer in the store.
type timerRecord struct {
	At        time.Time `json:"at"`
	Heartbeat bool      `json:"heartbeat,omitempty"`
}

func timerKey(agent string) string { return "timer." + agent }

// SetTimer arms the agent's one pending timer for at, replacing any
// earlier one, and stores it so a restart keeps it. heartbeat marks the
// agent's own heartbeat rather than a model request. A store failure is
// logged: the timer still fires in this process. On a replica that does
// not own the agent (Owns) nothing is stored: the owner's timer stays.
func (s *Scheduler) SetTimer(agent string, at time.Time, heartbeat bool) {
	s.mu.Lock()
	a := s.agents[agent]
	if a == nil {
		s.mu.Unlock()
		s.o.Log.Error("timer for an agent the scheduler does not know", "agent", agent)
		return
	}
	s.armTimer(a, at, heartbeat)
	s.mu.Unlock()
	_ = s.persistTimer(agent, &timerRecord{At: at, Heartbeat: heartbeat})
}

// NextTimer returns the agent's pending timer.
func (s *Scheduler) NextTimer(agent string) (at time.Time, heartbeat, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.agents[agent]; a != nil && a.timer != nil {
		return a.timer.at, a.timer.heartbeat, true
	}
	return time.Time{}, false, false
}

// armTimer replaces a's timer. Callers hold mu.
func (s *Scheduler) armTimer(a *agentEntry, at time.Time, heartbeat bool) {
	if a.timer != nil && a.timer.t != nil {
		a.timer.t.Stop()
	}
	if s.stopped {
		return
	}
	pt := &pendingTimer{at: at, heartbeat: heartbeat}
	a.timer = pt
	pt.t = s.o.Clock.AfterFunc(at.Sub(s.o.Clock.Now()), func() { s.timerFired(a, pt) })
}

func (s *Scheduler) timerFired(a *agentEntry, pt *pendingTimer) {
	s.mu.Lock()
	if a.timer != pt {
		s.mu.Unlock()
		return // replaced meanwhile
	}
	a.timer = nil
	s.mu.Unlock()
	if a.target.Gate() == "standby" || !s.Owns(a.name) {
		return // the owning replica serves the stored timer
	}
	s.timerServed(a.name, pt.at)
	kind := KindTimer
	if pt.heartbeat {
		kind = KindHeartbeat
	}
	a.target.Fire(Fire{Kind: kind, Due: pt.at})
}

// timerServed deletes the stored timer if it is still the one that fired
// at at (a newer one may have replaced it meanwhile).
func (s *Scheduler) timerServed(agent string, at time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rec, err := s.loadTimer(ctx, agent)
	if err != nil {
		s.o.Log.Error("could not check the stored timer", "agent", agent, "error", err)
		return
	}
	if rec != nil && rec.At.Equal(at) {
		_ = s.persistTimer(agent, nil)
	}
}

// ErrNotOwner is returned, and logged, instead of writing the durable
// state of an agent this replica does not own.
var ErrNotOwner = errors.New("not the owner: another replica owns this agent's timers")

// persistTimer stores (rec nil: deletes) the agent's timer, only if this
// replica owns the agent.
func (s *Scheduler) persistTimer(agent string, rec *timerRecord) error {
	w, ok := s.Writer(agent)
	if !ok || !s.Owns(agent) {
		s.o.Log.Warn("timer not written: this replica does not own the agent", "agent", agent)
		return fmt.Errorf("agent %q: %w", agent, ErrNotOwner)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	if rec == nil {
		err = w.Delete(ctx, timerKey(agent))
	} else {
		data, _ := json.Marshal(rec)
		_, err = w.Put(ctx, timerKey(agent), data)
	}
	if errors.Is(err, store.ErrFenced) {
		s.o.Log.Warn("timer not written: the agent's lease moved", "agent", agent)
		return fmt.Errorf("agent %q: %w (%w)", agent, ErrNotOwner, err)
	}
	if err != nil {
		s.o.Log.Error("could not store the agent's timer; it will not survive a restart", "agent", agent, "error", err)
	}
	return err
}

func (s *Scheduler) loadTimer(ctx context.Context, agent string) (*timerRecord, error) {
	var rec timerRecord
	found, err := store.GetJSON(ctx, s.o.Store, timerKey(agent), &rec)
	if errors.Is(err, store.ErrUnreadable) {
		s.o.Log.Warn("unreadable stored timer ignored", "agent", agent, "error", err)
		return nil, nil
	}
	if err != nil || !found {
		return nil, err
	}
	return &rec, nil
}

// restoreTimer arms the stored timer of a; one that fell due while the
// worker was down fires at once.
func (s *Scheduler) restoreTimer(ctx context.Context, a *agentEntry) error {
	rec, err := s.loadTimer(ctx, a.name)
	if err != nil {
		return fmt.Errorf("restore timer of %s: %w", a.name, err)
	}
	if rec == nil {
		return nil
	}
	s.mu.Lock()
	if a.timer == nil { // a timer set since start is newer
		s.armTimer(a, rec.At, rec.Heartbeat)
	}
	s.mu.Unlock()
	s.o.Log.Info("timer restored", "agent", a.name, "at", rec.At, "heartbeat", rec.Heartbeat)
	return nil
}

// Reload re-reads the agent's stored timer and arms it, replacing what
// this scheduler had, and counts the ticks its schedules missed: another
// replica owned the agent until now, or none did. Counting is idempotent:
// the latest handled tick is stored, so a second Reload counts nothing
// twice.
func (s *Scheduler) Reload(ctx context.Context, agent string) error {
	s.mu.Lock()
	a := s.agents[agent]
	if a != nil && a.timer != nil && a.timer.t != nil {
		a.timer.t.Stop()
		a.timer = nil
	}
	s.mu.Unlock()
	if a == nil {
		return nil
	}
	return s.load(ctx, a)
}
