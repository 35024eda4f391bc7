package lease

import (
	"context"
	"fmt"
	"time"
)

// A lapse is a let-go of every agent at once: this replica's record was
// not renewed within TTL - RenewEvery of the last confirmed renewal (the
// store was out of reach; the process was frozen or starved), or it is
// gone, or another replica writes it. Another replica may have taken any
// of the agents since, so the renewal that notices fences them all at
// once (fenceAll: Held and Fence turn false, in one step under mu, before
// the renewal ends) and hands the rest to a goroutine of its own
// (recover), so that a let-go of 10,000 agents never holds up the next
// renewal. recover tells each agent's OnLose (Lapsed) in its lane, then
// takes back in one round the leases that still name this replica: a
// lease taken back at the revision this replica last held is one that
// never left (Gain.Moved false), and the agent runs on from what this
// process holds, with no restore. Only those another replica took move.
// One line says why and how many at the let-go, and one what came back.

// lapse is the let-go being recovered from.
type lapse struct {
	why    string
	agents int
	at     time.Time
	// gains is Manager.unmovedGains at the let-go: the leases taken
	// back unchanged since are the count's growth.
	gains int64
	// late: renewals in a row that were late or failed; lateLogged: when
	// that was last logged.
	late       int
	lateLogged time.Time
	// running: a recover runs.
	running bool
	// letGoAt and letGoWhy are the last let-go, for Lagging.
	letGoAt  time.Time
	letGoWhy string
}

// fenceAll lets every held agent go at once, for why (after age without a
// confirmed renewal): their leases are no longer held or fenced here, and
// each is marked losing, so its OnLose is queued by its next step (recover
// or a seek), before any gain of it. Handovers under way are called off.
// It reports whether any agent was held.
func (m *Manager) fenceAll(why string, age time.Duration) bool {
	now := m.o.Clock.Now()
	m.mu.Lock()
	n := len(m.held)
	for a := range m.held {
		m.losing[a] = true
	}
	clear(m.held)
	m.heldList = nil
	for _, h := range m.handing {
		h.off = true
		h.cancel()
	}
	if n > 0 {
		m.lapse.why, m.lapse.agents, m.lapse.at, m.lapse.letGoAt, m.lapse.letGoWhy = why, n, now, now, why
		m.lapse.gains = m.unmovedGains.Load()
	}
	m.mu.Unlock()
	if n == 0 {
		return false
	}
	m.o.Log.Warn("letting every agent go: another replica may have taken them; those nobody took are taken back unchanged",
		"holder", m.o.Holder, "why", why, "agents", n, "last_renewed_ago", age.Round(time.Millisecond), "ttl", m.o.TTL)
	if m.o.OnLetGo != nil {
		m.o.OnLetGo(why, n)
	}
	return true
}

// recover tells the agents let go at a lapse (OnLose, Lapsed) and takes
// back the leases that still name this replica, then says what came back.
func (m *Manager) recover() {
	m.mu.Lock()
	if m.done || m.lapse.running {
		m.mu.Unlock()
		return // a renewal asks again while it is not over
	}
	m.lapse.running = true
	m.wg.Add(1)
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.lapse.running = false
		m.mu.Unlock()
		m.wg.Done()
	}()
	ctx := context.Background()
	m.round(ctx, m.isLosing, m.tellLost)
	if !m.selfLive(m.o.Clock.Now()) {
		return // taken back once a renewal lands (renewSelf asks again)
	}
	m.round(ctx, m.free, m.stepOne)
	m.mu.Lock()
	l := m.lapse
	held := len(m.held)
	m.lapse.why = ""
	m.mu.Unlock()
	if l.why == "" {
		return // another recover said it
	}
	m.o.Log.Info("agents taken back after a let-go", "holder", m.o.Holder, "why", l.why,
		"let_go", l.agents, "taken_back", m.unmovedGains.Load()-l.gains, "held", held, "after", m.o.Clock.Now().Sub(l.at).Round(time.Millisecond))
}

// recovering reports whether a let-go is not yet followed by the round
// that takes the agents back.
func (m *Manager) recovering() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lapse.why != ""
}

// isLosing reports whether the agent was let go at a lapse and is not
// told yet.
func (m *Manager) isLosing(agent string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.losing[agent]
}

// tellLost queues the OnLose of an agent let go at a lapse, unless a step
// did already.
func (m *Manager) tellLost(_ context.Context, agent string) {
	step := m.step(agent)
	step.Lock()
	defer step.Unlock()
	m.toldLost(agent)
}

// toldLost queues the agent's OnLose (Lapsed) if it was let go at a
// lapse and is not told yet. Callers hold its step.
func (m *Manager) toldLost(agent string) {
	m.mu.Lock()
	losing := m.losing[agent]
	delete(m.losing, agent)
	m.mu.Unlock()
	if !losing {
		return
	}
	m.setOwner(agent, "")
	if m.o.OnLose != nil {
		m.callsOf(agent).later(func() { m.o.OnLose(agent, Lapsed) })
	}
}

// noteRenewal keeps count of renewals that were late (more than twice
// RenewEvery after the last confirmed one) or failed, and says so once a
// minute while they go on.
func (m *Manager) noteRenewal(now, confirmed time.Time, known bool, err error) {
	late := err != nil || (known && now.Sub(confirmed) > 2*m.o.RenewEvery)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !late {
		m.lapse.late = 0
		return
	}
	m.lapse.late++
	if now.Sub(m.lapse.lateLogged) < time.Minute {
		return
	}
	m.lapse.lateLogged = now
	m.o.Log.Warn("renewals of this replica's record are late: the process may be starved of CPU, frozen, or cut off from the store",
		"holder", m.o.Holder, "late_in_a_row", m.lapse.late, "last_renewed_ago", now.Sub(confirmed).Round(time.Millisecond),
		"renew_every", m.o.RenewEvery, "lets_go_after", m.o.TTL-m.o.RenewEvery)
}

// Lagging says why this replica's leases are at risk, for readiness: its
// renewals have been late or failed two or more times in a row, or it let
// every agent go less than four TTLs ago. "" when neither.
func (m *Manager) Lagging() string {
	now := m.o.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.lapse.late >= 2:
		return fmt.Sprintf("lease renewals late or failed %d times in a row (last confirmed %s ago; agents are let go at %s)",
			m.lapse.late, now.Sub(m.self.renewed).Round(time.Second), m.o.TTL-m.o.RenewEvery)
	case !m.lapse.letGoAt.IsZero() && now.Sub(m.lapse.letGoAt) < 4*m.o.TTL:
		return fmt.Sprintf("let every agent go %s ago (%s)", now.Sub(m.lapse.letGoAt).Round(time.Second), m.lapse.letGoWhy)
	}
	return ""
}
