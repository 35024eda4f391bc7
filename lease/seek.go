package lease

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/agent-worker/agent-worker/store"
)

// stepOne seeks one agent's lease if this replica does not hold it,
// tells the callbacks, and looks at its placement.
func (m *Manager) stepOne(ctx context.Context, agent string) {
	step := m.step(agent)
	step.Lock()
	defer step.Unlock()
	ctx, cancel := context.WithTimeout(ctx, m.o.RenewEvery)
	gained := m.seek(ctx, agent)
	cancel()
	if gained {
		m.setOwner(agent, m.o.Holder)
		if m.o.OnAcquire != nil {
			m.callsOf(agent).later(func() { m.o.OnAcquire(agent) })
		}
	}
	if m.Held(agent) {
		m.placeHeld(agent)
	}
}

// placeOne looks at a held agent's placement, at a renewal: an agent
// whose step is busy (a handover releasing it, a seek or a kick looking
// at it) is left to that step.
func (m *Manager) placeOne(_ context.Context, agent string) {
	step := m.step(agent)
	if !step.TryLock() {
		return
	}
	defer step.Unlock()
	if m.Held(agent) {
		m.placeHeld(agent)
	}
}

// seek takes one agent's lease if it is free (absent, released, its
// holder's record expired or gone, or this replica's own from before a
// restart) and placed here, and reports whether it did. Nothing is taken
// while this replica's own record is not confirmed live. Callers hold
// the agent's step.
func (m *Manager) seek(ctx context.Context, agent string) (gained bool) {
	m.mu.Lock()
	_, holding := m.held[agent]
	done := m.done || !m.known[agent] // forgotten (agents.go)
	m.mu.Unlock()
	if done || holding {
		return false
	}
	now := m.o.Clock.Now()
	rec, err := m.o.Store.Get(ctx, key(agent))
	found := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return false
	}
	var cur record
	if found && json.Unmarshal(rec.Value, &cur) != nil {
		cur = record{} // unreadable: free
	}
	// freed is when the lease became free, as far as the record tells.
	freed := cur.Expires
	if found && cur.Holder != "" && cur.Holder != m.o.Holder {
		if cur.Replica {
			if freed, err = m.liveUntil(ctx, cur.Holder, now); err != nil {
				return false // cannot tell whether its holder lives
			}
		}
		if now.Before(freed) {
			m.setOwner(agent, cur.Holder)
			m.expectExpiry(agent, freed, now)
			return false // held by a live replica
		}
	}
	if !m.selfLive(now) {
		return false
	}
	if !m.mayTake(agent, cur, found, freed, now) {
		m.setOwner(agent, "")
		return false
	}
	mine, _ := json.Marshal(record{Holder: m.o.Holder, Expires: heldForever, Replica: true})
	if !found {
		newRev, err := m.o.Store.Create(ctx, key(agent), mine, 0)
		if err != nil {
			return false // another replica was quicker, or the store is down
		}
		m.setHeld(agent, newRev)
		m.o.Log.Info("lease taken", "agent", agent, "holder", m.o.Holder)
		return true
	}
	newRev, err := m.o.Store.Update(ctx, key(agent), mine, rec.Revision)
	if err != nil {
		return false
	}
	m.setHeld(agent, newRev)
	switch cur.Holder {
	case "":
		m.o.Log.Info("lease taken", "agent", agent, "holder", m.o.Holder, "released_for", cur.To)
	case m.o.Holder:
		m.o.Log.Info("lease taken back", "agent", agent, "holder", m.o.Holder)
	default:
		m.o.Log.Info("lease taken over", "agent", agent, "holder", m.o.Holder, "previous", cur.Holder, "expired", freed)
	}
	return true
}

// mayTake decides whether this replica takes a free lease (absent,
// released, expired, or its own from before a restart) that became free
// at freed.
func (m *Manager) mayTake(agent string, cur record, found bool, freed, now time.Time) bool {
	if found && cur.Holder == m.o.Holder {
		return true // ours: a restarted replica takes its leases back at once
	}
	if m.o.Assign == nil {
		return true
	}
	p := m.o.Assign(agent)
	switch {
	case p.Owner == "" || p.Owner == m.o.Holder:
		return true
	case !p.Eligible:
		return false
	case cur.To == m.o.Holder:
		return true // released for this replica by one that saw it so
	}
	// Placed on another live replica: leave it that one, unless it has
	// stayed free for a whole TTL (replicas disagree about who is live,
	// or the placed one is stuck).
	m.mu.Lock()
	since := m.started
	m.mu.Unlock()
	if found && freed.After(since) {
		since = freed
	}
	if now.Before(since.Add(m.o.TTL)) {
		return false
	}
	m.o.Log.Warn("lease free for a whole ttl and the replica it is placed on did not take it; taking it here", "agent", agent, "placed_on", p.Owner)
	m.mu.Lock()
	m.stuck[agent] = stuckOn{owner: p.Owner, until: now.Add(stuckFor * m.o.TTL)}
	m.mu.Unlock()
	return true
}

// expectExpiry arms a kick for when a lease held by another replica
// expires (at until), if the agent is placed here: its holder may have
// died, and the lease should move as soon as it is free rather than at
// the next round.
func (m *Manager) expectExpiry(agent string, until, now time.Time) {
	if m.o.Assign == nil || m.o.Assign(agent).Owner != m.o.Holder {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done || m.expiry[agent] != nil {
		return
	}
	m.expiry[agent] = m.o.Clock.AfterFunc(until.Sub(now)+10*time.Millisecond, func() {
		m.mu.Lock()
		delete(m.expiry, agent)
		m.mu.Unlock()
		if !m.Held(agent) {
			m.Kick(agent)
		}
	})
}

// lost lets a held agent go with its lease (OnLose with Lost, queued in
// its lane). Callers hold its step.
func (m *Manager) lost(agent string) {
	m.drop(agent)
	m.setOwner(agent, "")
	if m.o.OnLose != nil {
		m.callsOf(agent).later(func() { m.o.OnLose(agent, Lost) })
	}
}
