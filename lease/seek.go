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
	m.toldLost(agent) // let go at a lapse: told before any gain
	ctx, cancel := context.WithTimeout(ctx, m.o.RenewEvery)
	g, gained := m.seek(ctx, agent)
	cancel()
	if gained {
		if !g.Moved {
			m.unmovedGains.Add(1)
		}
		m.setOwner(agent, m.o.Holder)
		if m.o.OnAcquire != nil {
			m.callsOf(agent).later(func() { m.o.OnAcquire(agent, g) })
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
// restart or a lapse) and placed here, claims its fence in the store
// (store.Store.Claim), and reports whether it did and how. Nothing is
// taken while this replica's own record is not confirmed live. Callers
// hold the agent's step.
func (m *Manager) seek(ctx context.Context, agent string) (g Gain, gained bool) {
	m.mu.Lock()
	_, holding := m.held[agent]
	last, heldBefore := m.lastHeld[agent]
	done := m.done || !m.known[agent] // forgotten (agents.go)
	m.mu.Unlock()
	if done || holding {
		return Gain{}, false
	}
	now := m.o.Clock.Now()
	rec, err := m.o.Store.Get(ctx, key(agent))
	found := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return Gain{}, false
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
				return Gain{}, false // cannot tell whether its holder lives
			}
		}
		if now.Before(freed) {
			m.setOwner(agent, cur.Holder)
			m.expectExpiry(agent, freed, now)
			return Gain{}, false // held by a live replica
		}
	}
	if !m.selfLive(now) {
		return Gain{}, false
	}
	if !m.mayTake(agent, cur, found, freed, now) {
		m.setOwner(agent, "")
		return Gain{}, false
	}
	mine, _ := json.Marshal(record{Holder: m.o.Holder, Expires: heldForever, Replica: true})
	var newRev uint64
	if !found {
		newRev, err = m.o.Store.Create(ctx, key(agent), mine, 0)
	} else {
		newRev, err = m.o.Store.Update(ctx, key(agent), mine, rec.Revision)
	}
	if err != nil {
		return Gain{}, false // another replica was quicker, or the store is down
	}
	// Claimed before anything reads the agent's state under it: a write
	// of the previous holder's that lands after this is refused.
	g = Gain{Fence: store.Fence{Key: key(agent), Revision: newRev}, Moved: !found || !heldBefore || last != rec.Revision}
	if err := m.o.Store.Claim(ctx, g.Fence); err != nil {
		m.o.Log.Warn("lease taken but its fence not claimed; taken again at the next round", "agent", agent, "holder", m.o.Holder, "error", err)
		return Gain{}, false
	}
	m.setHeld(agent, newRev)
	switch {
	case cur.Holder == "":
		m.o.Log.Info("lease taken", "agent", agent, "holder", m.o.Holder, "released_for", cur.To)
	case cur.Holder == m.o.Holder && !g.Moved:
		// After a lapse nobody used: one summary line says how many.
		m.o.Log.Debug("lease taken back unchanged", "agent", agent, "holder", m.o.Holder)
	case cur.Holder == m.o.Holder:
		m.o.Log.Info("lease taken back", "agent", agent, "holder", m.o.Holder)
	default:
		m.o.Log.Info("lease taken over", "agent", agent, "holder", m.o.Holder, "previous", cur.Holder, "expired", freed)
	}
	return g, true
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
