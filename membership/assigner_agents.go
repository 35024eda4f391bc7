package membership

import "slices"

// SetAgents replaces the agents the Assigner places (a config reload
// added or removed some); placements are computed again at the next
// Place. Rendezvous hashing keeps every other agent where it was.
func (a *Assigner) SetAgents(agents []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.agents = slices.Clone(agents)
	a.valid = false
}
