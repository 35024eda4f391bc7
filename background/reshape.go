package background

import "errors"

// errParentRemoved stops the subagents of a parent a config reload
// removed (or whose spawn_subagent grant it withdrew).
var errParentRemoved = errors.New("parent removed from the config")

// Set registers parent name, or gives a registered one a new Spec from
// its next spawn (a config reload): its running subagents go on under
// the Spec they started with, and still count against the new cap.
func (m *Manager) Set(name string, p Parent, s Spec) {
	if s.Max <= 0 {
		s.Max = 3
	}
	if s.Timeout <= 0 {
		s.Timeout = defaultTimeout
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	f := &family{name: name, parent: p, spec: s, running: map[string]*sub{}}
	if old := m.parents[name]; old != nil {
		// The same running map: a running subagent's finish deletes
		// itself from it through the family it started in.
		f.running, f.keyed, f.keys = old.running, old.keyed, old.keys
	}
	m.parents[name] = f
}

// Remove forgets parent name (a config reload removed it or withdrew its
// spawn_subagent grant): its subagents running here are stopped, each
// reported as stopped; a spawn for it is refused from now on. In
// distributed mode its queued jobs are left for a replica that still
// has it, and given up after MaxRuns deliveries if none has.
func (m *Manager) Remove(name string) {
	m.mu.Lock()
	f := m.parents[name]
	delete(m.parents, name)
	n := 0
	if f != nil {
		n = len(f.running)
		for _, s := range f.running {
			s.cancel(errParentRemoved)
		}
	}
	m.mu.Unlock()
	if n > 0 {
		m.o.Log.Info("subagents stopped: their parent no longer spawns subagents after a config reload", "agent", name, "stopped", n)
	}
}
