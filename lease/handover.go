package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agent-worker/agent-worker/store"
)

// handover is an agent being handed to another replica. It stays in
// Manager.handing until its goroutine ends, called off or not, so that at
// most one handover of an agent is under way.
type handover struct {
	to     string
	cancel context.CancelFunc
	off    bool // called off; the goroutine is ending
}

// placeHeld starts a handover of a held agent that is placed on another
// replica, or calls off one whose placement changed. Callers hold its
// step.
func (m *Manager) placeHeld(agent string) {
	if m.o.Assign == nil {
		return
	}
	owner := m.o.Assign(agent).Owner
	now := m.o.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.handing[agent]
	if st, ok := m.stuck[agent]; ok && (st.owner != owner || !now.Before(st.until)) {
		delete(m.stuck, agent)
	}
	_, stuck := m.stuck[agent]
	switch {
	case m.done:
	case h != nil && h.to != owner && !h.off:
		m.o.Log.Info("handover called off: the agent's placement changed", "agent", agent, "was_for", h.to, "placed_on", owner)
		h.off = true
		h.cancel()
	case h == nil && owner != "" && owner != m.o.Holder && !stuck:
		ctx, cancel := context.WithCancel(context.Background())
		h = &handover{to: owner, cancel: cancel}
		m.handing[agent] = h
		m.wg.Add(1)
		go m.handOver(ctx, agent, h)
	}
}

// handOver drains the agent, then lets it go and releases its lease for
// h.to. The lease is renewed meanwhile by the rounds.
func (m *Manager) handOver(ctx context.Context, agent string, h *handover) {
	defer m.wg.Done()
	defer func() {
		m.mu.Lock()
		if m.handing[agent] == h {
			delete(m.handing, agent)
		}
		m.mu.Unlock()
		h.cancel()
	}()
	m.o.Log.Info("handing agent over: no new turn starts here; a running turn may finish", "agent", agent, "to", h.to)
	if m.o.OnDrain != nil {
		if err := m.o.OnDrain(ctx, agent); err != nil {
			m.o.Log.Info("handover called off while the turn finished; the agent stays", "agent", agent, "to", h.to, "error", err)
			return
		}
	}
	step := m.step(agent)
	step.Lock()
	defer step.Unlock()
	m.mu.Lock()
	rev, holding := m.held[agent]
	done := m.done
	m.mu.Unlock()
	if !holding || done {
		return // lost meanwhile (OnLose was told), or stopping (Stop releases it)
	}
	if ctx.Err() != nil || m.o.Assign(agent).Owner != h.to {
		m.o.Log.Info("handover called off; the agent stays", "agent", agent, "was_for", h.to)
		if m.o.OnUndrain != nil {
			m.callsOf(agent).now(func() { m.o.OnUndrain(agent) })
		}
		return
	}
	if m.o.OnLose != nil {
		m.callsOf(agent).now(func() { m.o.OnLose(agent, HandedOver) })
	}
	m.drop(agent)
	ectx, cancel := context.WithTimeout(context.Background(), m.o.RenewEvery)
	m.expire(ectx, agent, rev, h.to)
	cancel()
	m.setOwner(agent, "")
	m.o.Log.Info("agent handed over: lease released", "agent", agent, "to", h.to)
	if m.o.OnReleased != nil {
		m.o.OnReleased(agent, h.to)
	}
}

// expire writes a released record over our lease (revision rev) so that
// another replica may take it at once: to, if set, names the replica it is
// released for. A conflict is settled like a renewal's: a record that
// still names us is our own write whose reply was lost, and is expired at
// its revision; one naming anyone else means someone holds it already.
func (m *Manager) expire(ctx context.Context, agent string, rev uint64, to string) {
	gone, _ := json.Marshal(record{Holder: "", Expires: m.o.Clock.Now(), To: to})
	for range 3 {
		_, err := m.o.Store.Update(ctx, key(agent), gone, rev)
		if err == nil || errors.Is(err, store.ErrNotFound) {
			return
		}
		if !errors.Is(err, store.ErrConflict) {
			m.o.Log.Warn("could not release a lease; it expires by itself", "agent", agent, "error", fmt.Sprint(err))
			return
		}
		e, gerr := m.o.Store.Get(ctx, key(agent))
		if gerr != nil {
			return
		}
		var cur record
		if json.Unmarshal(e.Value, &cur) != nil || cur.Holder != m.o.Holder {
			return
		}
		rev = e.Revision
	}
}
