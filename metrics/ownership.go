package metrics

// ownershipReasons are lease.Acquired, Released, Lost and HandedOver: the
// reason label of agent_worker_ownership_changes_total.
var ownershipReasons = []string{"acquired", "released", "lost", "handed_over"}

// OwnershipChange counts one change of this replica's ownership of agent
// (agent_worker_ownership_changes_total): reason is acquired, released,
// lost or handed_over. Agents not configured are not counted
// (agent_worker_events_dropped_total{reason="unconfigured"}), nor is any
// other reason.
func (m *Metrics) OwnershipChange(agent, reason string) {
	if m.agents.get(agent) == nil {
		m.drops.unconfigured.Add(1)
		return
	}
	if oneOf(reason, ownershipReasons) == other {
		return
	}
	m.ownership.WithLabelValues(agent, reason).Inc()
}
