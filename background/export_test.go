package background

// PublishReport publishes a subagent report of parent's subagent id as
// the distributed Manager m does when the subagent finishes.
func PublishReport(m *Manager, parent, id, text string) bool {
	return m.remote.publishReport(parent, id, text, "", nil)
}
