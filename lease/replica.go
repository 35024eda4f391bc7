package lease

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agent-worker/agent-worker/store"
)

// replicaRecord is a replica in the store, under replicaKey(holder):
// every lease record naming the holder with Replica set lasts until
// Expires.
type replicaRecord struct {
	Holder  string    `json:"holder"`
	Expires time.Time `json:"expires"`
}

// replicaKey is the store key of holder's replica record:
// "leasereplica.<holder>", the holder hex-encoded after a "_" when it has
// a character beyond [A-Za-z0-9-] (store keys are dot-separated tokens).
func replicaKey(holder string) string {
	for _, r := range holder {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return "leasereplica._" + hex.EncodeToString([]byte(holder))
		}
	}
	return "leasereplica." + holder
}

// heldForever is the Expires of a lease record with Replica set: far
// enough that a replica of an older version never takes it over.
var heldForever = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// renewSelf renews this replica's record (through Options.Renewal),
// creating it (or adopting one left by an earlier run under the same
// holder name) when none is known. A renewal that comes TTL - RenewEvery
// or more after the last confirmed one lets every agent go first
// (fenceAll): another replica may have taken any of them meanwhile. It
// reports whether it let agents go, or renewed the record while a let-go
// waits to be taken back, so that the caller has them told and the leases
// still naming this replica taken back (recover). It does no more than
// that: no step, no callback, no round over the agents.
func (m *Manager) renewSelf(ctx context.Context) (letGo bool) {
	m.renewing.Lock()
	defer m.renewing.Unlock()
	ctx, cancel := context.WithTimeout(ctx, m.o.RenewEvery)
	defer cancel()
	m.mu.Lock()
	self, done := m.self, m.done
	m.mu.Unlock()
	if done {
		return false
	}
	now := m.o.Clock.Now()
	st := m.o.Renewal
	gone := ""
	mine, _ := json.Marshal(replicaRecord{Holder: m.o.Holder, Expires: now.Add(m.o.TTL)})
	k := replicaKey(m.o.Holder)
	var rev uint64
	var err error
	if m.o.Live != nil {
		if err = m.o.Live(); err != nil {
			err = fmt.Errorf("not renewed: this replica cannot do its agents' work: %w", err)
		}
	}
	switch {
	case err != nil:
	case self.rev == 0:
		rev, err = st.Create(ctx, k, mine, 0)
		if errors.Is(err, store.ErrExists) {
			// An earlier run's under the same name, or our own create
			// whose reply was lost: nobody else writes it.
			var e store.Entry
			if e, err = st.Get(ctx, k); err == nil {
				rev, err = st.Update(ctx, k, mine, e.Revision)
			}
		}
	default:
		rev, err = st.Update(ctx, k, mine, self.rev)
		switch {
		case errors.Is(err, store.ErrConflict):
			// Our own renewal whose reply was lost (nobody else writes
			// the record): adopt what the store holds.
			var conflict bool
			rev, conflict, err = m.recheckSelf(ctx, k, mine)
			if conflict {
				gone = "holder_conflict"
			}
		case errors.Is(err, store.ErrNotFound):
			m.o.Log.Warn("this replica's record is gone from the store; letting every agent go", "holder", m.o.Holder)
			gone = "record_gone"
			rev, err = st.Create(ctx, k, mine, 0)
		}
	}
	took := m.o.Clock.Now().Sub(now)
	if m.o.OnRenewed != nil {
		m.o.OnRenewed(took, err)
	}
	// Whether this write landed or not, the leases are safe only until
	// TTL after the last renewal known to have landed (a conflict's
	// read-back may have shown a later one than we knew of).
	m.mu.Lock()
	confirmed := m.self.renewed
	m.mu.Unlock()
	why := gone
	if why == "" && self.rev != 0 && now.Sub(confirmed) >= m.o.TTL-m.o.RenewEvery {
		why = "late_renewal"
	}
	if why != "" {
		letGo = m.fenceAll(why, now.Sub(confirmed))
	}
	m.noteRenewal(now, confirmed, self.rev != 0, err)
	if err != nil {
		// Tried again at the next renewal; the agents are let go there
		// once TTL - RenewEvery has passed since the last confirmed one.
		m.o.Log.Error("renewal of this replica's record failed", "holder", m.o.Holder, "error", err, "took", took)
		return letGo
	}
	if why == "holder_conflict" {
		return letGo // the record is another holder's: nothing to renew
	}
	m.mu.Lock()
	m.self = hold{rev: rev, renewed: now}
	m.mu.Unlock()
	return letGo || m.recovering()
}

// recheckSelf settles a renewal of this replica's record that conflicted:
// the record names this replica (it is our own renewal, applied, whose
// reply we never got), so its revision is adopted and it is renewed
// again. A record naming another holder means two replicas share the
// holder name: that is logged and reported (conflict), and the caller
// lets every agent go.
func (m *Manager) recheckSelf(ctx context.Context, k string, mine []byte) (rev uint64, conflict bool, err error) {
	st := m.o.Renewal
	e, err := st.Get(ctx, k)
	if err != nil {
		return 0, false, err
	}
	var cur replicaRecord
	if json.Unmarshal(e.Value, &cur) != nil || cur.Holder != m.o.Holder {
		m.o.Log.Error("this replica's record names another holder: is lease.holder shared by two replicas?", "holder", m.o.Holder, "record_holder", cur.Holder)
		return 0, true, errors.New("replica record taken by another holder")
	}
	m.mu.Lock()
	// The record's expiry, not our clock, dates the renewal that landed.
	m.self = hold{rev: e.Revision, renewed: cur.Expires.Add(-m.o.TTL)}
	m.mu.Unlock()
	m.o.Log.Info("renewal of this replica's record had already been applied; keeping it", "holder", m.o.Holder, "revision", e.Revision)
	rev, err = st.Update(ctx, k, mine, e.Revision)
	return rev, false, err
}

// selfLive reports whether this replica's record is confirmed renewed
// recently enough that it may take a lease: its leases outlive now by at
// least RenewEvery.
func (m *Manager) selfLive(now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.self.rev != 0 && now.Sub(m.self.renewed) < m.o.TTL-m.o.RenewEvery
}

// Doubt says why this replica's word on agent cannot be relied on: it
// holds the agent's lease, but its record's last confirmed renewal is
// TTL - RenewEvery old or more, so another replica may have taken the
// lease while this one was cut off from the store. (A renewal round lets
// such leases go, but only once it runs: one stuck on an unreachable
// store keeps Held true meanwhile.) It returns "" when this replica does
// not hold the lease, or holds it surely.
func (m *Manager) Doubt(agent string) string {
	if !m.Held(agent) {
		return ""
	}
	return m.unsure()
}

// Sure reports whether every lease this replica holds is surely its own:
// its record was confirmed renewed less than TTL - RenewEvery ago.
func (m *Manager) Sure() bool { return m.unsure() == "" }

// unsure says why this replica's leases are in doubt, or "".
func (m *Manager) unsure() string {
	now := m.o.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.self.rev != 0 && now.Sub(m.self.renewed) < m.o.TTL-m.o.RenewEvery {
		return ""
	}
	return fmt.Sprintf("this replica's lease on it is unconfirmed: its record was last renewed %s ago, and another replica may have taken it while the store was out of reach",
		now.Sub(m.self.renewed).Round(time.Second))
}

// life is another replica's record as last read: until when its leases
// last, and when it was read.
type life struct {
	until, read time.Time
}

// liveUntil returns until when holder's leases last, as the store says:
// zero if its record is gone. A reading still in the future is used
// again (records are only ever renewed forward); one that has passed is
// read afresh, so a holder is never taken as dead on an old reading.
func (m *Manager) liveUntil(ctx context.Context, holder string, now time.Time) (time.Time, error) {
	m.mu.Lock()
	l, ok := m.lives[holder]
	m.mu.Unlock()
	if ok && now.Before(l.until) && now.Sub(l.read) < m.o.TTL {
		return l.until, nil
	}
	e, err := m.o.Store.Get(ctx, replicaKey(holder))
	var cur replicaRecord
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return time.Time{}, err
	case json.Unmarshal(e.Value, &cur) != nil:
		cur = replicaRecord{} // unreadable: no live replica
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for h, l := range m.lives {
		if now.Sub(l.read) > 10*m.o.TTL {
			delete(m.lives, h)
		}
	}
	m.lives[holder] = life{until: cur.Expires, read: now}
	return cur.Expires, nil
}

// verifyRounds is how many renewals it takes to read back every held
// lease record once (two minutes at the default TTL; at 10,000 agents
// that is 83 reads a second).
const verifyRounds = 24

// verifySome reads back the next few held leases (a verifyRounds-th of
// them, at least one) and lets go of any whose record is gone or names
// another holder.
func (m *Manager) verifySome(ctx context.Context) {
	held := m.HeldAgents()
	if len(held) == 0 {
		return
	}
	m.mu.Lock()
	from := m.verified
	m.mu.Unlock()
	n := (len(held) + verifyRounds - 1) / verifyRounds
	i := 0
	for i < len(held) && held[i] <= from {
		i++
	}
	var last string
	for j := range n {
		a := held[(i+j)%len(held)]
		last = a
		m.verifyOne(ctx, a)
	}
	m.mu.Lock()
	m.verified = last
	if last == held[len(held)-1] {
		m.verified = ""
	}
	m.mu.Unlock()
}

// verifyOne reads back one held lease.
func (m *Manager) verifyOne(ctx context.Context, agent string) {
	step := m.step(agent)
	if !step.TryLock() {
		return // a step is looking at it now
	}
	defer step.Unlock()
	m.mu.Lock()
	rev, holding := m.held[agent]
	m.mu.Unlock()
	if !holding {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, m.o.RenewEvery)
	defer cancel()
	e, err := m.o.Store.Get(ctx, key(agent))
	var cur record
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return // read again in verifyRounds renewals
	case json.Unmarshal(e.Value, &cur) != nil:
		cur = record{}
	}
	if cur.Holder == m.o.Holder && cur.Replica && e.Revision == rev {
		return
	}
	// Another holder's, gone, or ours at another revision (a write of
	// ours whose reply was lost): the fence this replica holds no longer
	// holds. Let it go; a lease still naming this replica is taken back
	// (and claimed) at the next round.
	m.o.Log.Warn("lease lost to another replica; letting the agent go", "agent", agent, "holder", m.o.Holder, "current", cur.Holder,
		"revision", rev, "current_revision", e.Revision)
	m.lost(agent)
}
