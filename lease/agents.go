package lease

import (
	"context"
	"slices"
	"sync"
)

// The agent set changes with a config reload: Learn adds an agent that
// this replica then seeks like the agents it started with (placed by
// Assign, taken when free), Forget lets one go for good. Every replica
// reloads its own file, so for a while replicas may disagree about an
// agent; a replica that does not know it never takes it.

// step is the agent's step mutex, made on first use; it is never dropped,
// so a round that picked an agent before a Forget serialises with it.
func (m *Manager) step(agent string) *sync.Mutex {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.steps[agent]
	if s == nil {
		s = &sync.Mutex{}
		m.steps[agent] = s
	}
	return s
}

// knows reports whether agent is among the agents this replica seeks.
func (m *Manager) knows(agent string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.known[agent]
}

// agentList is the agents this replica seeks, sorted. The slice is never
// modified (Learn and Forget replace it): callers may range over it.
func (m *Manager) agentList() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.agents
}

// Learn adds agents to those this replica seeks and looks at their leases
// at once (Kick): a free one placed here is taken, and OnAcquire told, as
// for the agents the Manager started with. Known agents are left alone.
func (m *Manager) Learn(agents ...string) {
	var added []string
	m.mu.Lock()
	for _, a := range agents {
		if !m.known[a] {
			m.known[a] = true
			added = append(added, a)
		}
	}
	if len(added) > 0 {
		list := append(slices.Clone(m.agents), added...)
		slices.Sort(list)
		m.agents = list
	}
	m.mu.Unlock()
	for _, a := range added {
		m.Kick(a)
	}
}

// Forget stops seeking agent and releases its lease if this replica holds
// it, without telling OnLose: the caller has already stopped everything
// that ran for it (its turn finished). The lease record is expired, so a
// replica whose config still has the agent may take it at once; the
// agent's other stored state is not touched. Forgetting an unknown agent
// does nothing.
func (m *Manager) Forget(ctx context.Context, agent string) {
	step := m.step(agent)
	step.Lock()
	defer step.Unlock()
	m.mu.Lock()
	if !m.known[agent] {
		m.mu.Unlock()
		return
	}
	delete(m.known, agent)
	m.agents = slices.DeleteFunc(slices.Clone(m.agents), func(a string) bool { return a == agent })
	rev, held := m.held[agent]
	if t := m.expiry[agent]; t != nil {
		t.Stop()
		delete(m.expiry, agent)
	}
	delete(m.stuck, agent)
	m.mu.Unlock()
	if !held {
		return
	}
	m.drop(agent)
	m.expire(ctx, agent, rev, "")
	m.setOwner(agent, "")
}

// Serial runs f in the agent's callback lane: after every OnAcquire,
// OnLose and OnUndrain queued for it before, and before any queued
// after, so f sees and changes the agent's ownership without a callback
// running at the same time. It returns when f has. f must not call back
// into the Manager's callbacks for the same agent.
func (m *Manager) Serial(agent string, f func()) { m.callsOf(agent).now(f) }
