package scheduler

import (
	"fmt"
	"time"
)

// A config reload reshapes the schedules: Replace gives an agent its new
// target and schedules (adding an agent the scheduler does not know), and
// Remove forgets one. The agent's pending timer (the wake the model asked
// for, or its heartbeat) is kept across a Replace. Stored state — the
// last tick of each schedule, the stored timer — is not touched, so an
// agent re-added later counts its missed ticks as after a restart.
//
// Not guaranteed: a tick whose timer fired just before the Replace may
// still go to the previous target; the driver hands what the previous
// target had queued to the new one, and a fire that reaches it after it
// stopped is logged ("wake ignored: agent is stopping"), as a missed tick
// is.

// Replace sets agent's target and schedules. Every schedule is armed
// again from now (once the scheduler has started), so an unchanged one
// keeps its next tick and a changed one fires by its new spec; one no
// longer listed is disarmed.
// It fails, changing nothing, on a bad cron spec or time zone.
func (s *Scheduler) Replace(agent string, t Target, schedules []Schedule) error {
	next, err := s.entries(agent, t, schedules)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.agents[agent]
	if old != nil {
		next.timer = old.timer
		if pt := old.timer; pt != nil && pt.t != nil {
			// Re-armed on the new entry: its firing names its agent entry.
			pt.t.Stop()
			s.armTimer(next, pt.at, pt.heartbeat)
		}
		for _, e := range old.schedules {
			s.retire(e)
		}
	}
	s.agents[agent] = next
	if s.started {
		for _, e := range next.schedules {
			s.arm(e, s.o.Clock.Now())
		}
	}
	return nil
}

// Remove disarms and forgets the agent's schedules and timer; stored state
// stays (a re-added agent finds its timer and last ticks). Unknown agents
// are ignored.
func (s *Scheduler) Remove(agent string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.agents[agent]
	if a == nil {
		return
	}
	for _, e := range a.schedules {
		s.retire(e)
	}
	if a.timer != nil && a.timer.t != nil {
		a.timer.t.Stop()
	}
	a.timer = nil
	delete(s.agents, agent)
}

// retire disarms e for good. Callers hold mu.
func (s *Scheduler) retire(e *entry) {
	e.retired = true
	if e.t != nil {
		e.t.Stop()
	}
}

// entries parses schedules into a new agent entry for t, as Add does.
func (s *Scheduler) entries(agent string, t Target, schedules []Schedule) (*agentEntry, error) {
	a := &agentEntry{name: agent, target: t}
	for _, sc := range schedules {
		if sc.Overlap == "" {
			sc.Overlap = OverlapSkip
		}
		c, err := Parse(sc.Cron, sc.Timezone)
		if err != nil {
			return nil, fmt.Errorf("agent %s schedule %s: %w", agent, sc.Name, err)
		}
		if !sc.Enabled {
			s.o.Log.Info("schedule disabled", "agent", agent, "schedule", sc.Name)
			continue
		}
		if first := c.Next(s.o.Clock.Now()); c.Next(first).Sub(first) < time.Minute {
			s.o.Log.Warn("schedule fires more often than once a minute", "agent", agent, "schedule", sc.Name, "cron", sc.Cron)
		}
		a.schedules = append(a.schedules, &entry{agent: a, s: sc, cron: c})
	}
	return a, nil
}
