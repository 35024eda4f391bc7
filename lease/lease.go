// Package lease gives each agent exactly one owner among the worker
// replicas that share a store: a replica runs an agent's turns, consumes
// its messages and fires its timers only while it holds the agent's lease.
// A lease is a store key holding the holder and an expiry, taken and
// renewed with compare-and-set, so the store's revision of the key is a
// fencing token: a deposed holder's renewal fails and it lets go at once.
// It must not decide what an owner does.
//
// A renewal that fails with a conflict is settled by reading the record:
// the lease is lost only if the record is gone, has expired or names
// another holder. A record that still names this replica is its own
// renewal that the store applied but whose reply was lost (a timeout or a
// reconnect); the replica adopts that record's revision as its fencing
// token and keeps the lease.
//
// Spreading. With Options.Assign (package membership: rendezvous hashing
// over the live replicas), a replica takes a free lease only if the agent
// is placed on it, and hands over a lease it holds once the agent is
// placed on another live replica: it stops starting turns for the agent,
// lets a running turn finish (OnDrain), lets the agent go (OnLose with
// HandedOver), expires the lease at once naming the new owner, and tells
// it (OnReleased), which takes it without waiting for its next round
// (Kick). A free lease its placed replica leaves untaken for a whole TTL
// is taken by any eligible replica, so replicas that disagree about the
// membership for a while cannot strand an agent; it is not handed back to
// that replica until the membership changes (Rebalance) or a few TTLs
// pass.
//
// Guarantees: at most one replica believes it holds a lease at a time,
// provided replicas' clocks differ by less than TTL - RenewEvery and each
// replica's Holder is unique; when a holder dies, another replica takes
// over within TTL + RenewEvery (with Assign: provided the others drop the
// dead replica from their membership within that time too); a renewal
// whose reply is lost does not cost the holder its lease; a handover
// never cancels a running turn (the lease is renewed while it finishes),
// and is called off if the placement changes again before it completes.
// Not guaranteed: a holder cut off from the store keeps running until a
// renewal round finds TTL - RenewEvery passed since its last confirmed
// renewal (one the store is known to have applied); a handover is not
// bounded in time (it waits for the running turn, which its turn timeout
// bounds); a lost lease still cancels the running turn at once (fencing).
package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/store"
)

// Reason says why this replica gained or lost an agent.
type Reason string

// Ownership changes.
const (
	// Acquired: this replica took the lease (free, expired, released to
	// it, or its own from before a restart).
	Acquired Reason = "acquired"
	// Released: this replica let the lease go as it stopped.
	Released Reason = "released"
	// Lost: another replica holds it now, or this one could not renew it
	// in time. The running turn is cancelled at once.
	Lost Reason = "lost"
	// HandedOver: the agent is placed on another live replica; this one
	// let its running turn finish and released the lease to it.
	HandedOver Reason = "handed_over"
)

// Placement is where this replica's view of the membership puts an agent.
type Placement struct {
	// Owner is the replica that should hold the agent; "" means no view:
	// any replica may take it when it is free, as without Assign.
	Owner string
	// Eligible: this replica may take the agent when Owner leaves it free
	// for a whole TTL (false for a pinned agent whose affinity this
	// replica does not match while a replica that matches it is live).
	Eligible bool
}

// Options configure a Manager.
type Options struct {
	Store store.Store // required
	Clock clock.Clock
	Log   *slog.Logger
	// Holder names this replica (host, pid, random); required, and unique
	// among the replicas: a record naming it is taken to be this
	// replica's own write.
	Holder string
	// TTL is how long a lease lasts without renewal. Default 15s.
	TTL time.Duration
	// RenewEvery is how often leases are renewed and free ones sought.
	// Default TTL/3.
	RenewEvery time.Duration
	// OnAcquire and OnLose are told when this replica gains or loses an
	// agent. One agent's run one at a time, in order; different agents'
	// may run at once (up to callLanes), on goroutines of the Manager's (a
	// renewal does not wait for them; Start returns once the first round's
	// OnAcquires have run). They must not block for long.
	// OnLose with HandedOver follows a successful OnDrain: nothing runs
	// for the agent any more. A lost lease is fenced at once (Held is
	// false) even while its OnLose waits behind others.
	OnAcquire func(agent string)
	OnLose    func(agent string, why Reason)
	// Assign says where the agent belongs. Nil: every replica takes any
	// free lease (a hot standby).
	Assign func(agent string) Placement
	// OnDrain prepares a handover on a goroutine of its own: stop starting
	// turns for the agent and return once none runs (never cancelling
	// one). If ctx ends first (the handover was called off) it must undo
	// that and return ctx's error. Nil: nothing to wait for.
	OnDrain func(ctx context.Context, agent string) error
	// OnUndrain undoes a successful OnDrain when the handover is called
	// off afterwards (the placement changed back); the agent stays here.
	OnUndrain func(agent string)
	// OnReleased is told after this replica expired a lease it let go of
	// (handover or Stop), with the replica the agent is placed on ("" if
	// none), so that it can be told to take the lease at once.
	OnReleased func(agent, to string)
	// OnOwner is told who holds an agent's lease, as far as this replica
	// has seen ("" none), whenever that changes.
	OnOwner func(agent, holder string)
}

// record is a lease in the store, under lease.<agent>.
type record struct {
	Holder  string    `json:"holder"`
	Expires time.Time `json:"expires"`
	// To names the replica a released lease was released for.
	To string `json:"to,omitempty"`
}

// Manager holds this replica's leases.
type Manager struct {
	o      Options
	agents []string
	known  map[string]bool
	// steps serialise each agent's read-modify-writes of its lease and
	// the callbacks that follow them; agents' steps run in parallel
	// (roundWorkers at a time in a round), so a round over many agents
	// takes a few store round trips, not one per agent.
	steps map[string]*sync.Mutex
	// calls run the callbacks (OnAcquire, OnLose, OnUndrain) in the
	// order the steps queued them, one lane per agent (an agent always
	// uses the same lane), each lane on a goroutine of its own: a step
	// does not wait for them, so slow callbacks (restoring thousands of
	// gained agents) never hold up renewals, and
	// callLanes agents' callbacks run at once.
	calls []*callQueue

	mu      sync.Mutex
	held    map[string]hold
	handing map[string]*handover
	owners  map[string]string
	expiry  map[string]clock.Timer // kicks armed for when a lease expires
	// stuck: agents taken because the replica they are placed on left
	// them free for a TTL; not handed back to it until the membership
	// changes (Rebalance) or stuckFor passes.
	stuck map[string]stuckOn
	timer clock.Timer // the next round seeking free leases
	// renewTimer is the next renewal of the leases held.
	renewTimer clock.Timer
	done       bool
	started    time.Time
	// rebalancing: a Rebalance round runs; again: another was asked for.
	rebalancing, again bool
	wg                 sync.WaitGroup
}

// hold is a lease this replica holds: the revision of its record (the
// fencing token) and when it was last renewed, by the time the record's
// expiry was reckoned from (a renewal counts only once the store is known
// to have applied it).
type hold struct {
	rev     uint64
	renewed time.Time
}

// stuckOn is the replica that left an agent free, and until when it is
// not handed back to it.
type stuckOn struct {
	owner string
	until time.Time
}

// stuckFor is how many TTLs an agent taken from a replica that left it
// free stays here, membership unchanged, before a handover to it is tried
// again.
const stuckFor = 4

// handover is an agent being handed to another replica. It stays in
// Manager.handing until its goroutine ends, called off or not, so that at
// most one handover of an agent is under way.
type handover struct {
	to     string
	cancel context.CancelFunc
	off    bool // called off; the goroutine is ending
}

// New returns a Manager for agents; Start it.
func New(agents []string, o Options) (*Manager, error) {
	if o.Store == nil || o.Holder == "" {
		return nil, errors.New("lease: a store and a holder name are required")
	}
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.TTL <= 0 {
		o.TTL = 15 * time.Second
	}
	if o.RenewEvery <= 0 {
		o.RenewEvery = o.TTL / 3
	}
	as := append([]string(nil), agents...)
	sort.Strings(as)
	known := make(map[string]bool, len(as))
	steps := make(map[string]*sync.Mutex, len(as))
	for _, a := range as {
		known[a] = true
		steps[a] = &sync.Mutex{}
	}
	return &Manager{o: o, agents: as, known: known, steps: steps, calls: newCallLanes(), held: map[string]hold{}, handing: map[string]*handover{},
		owners: map[string]string{}, expiry: map[string]clock.Timer{}, stuck: map[string]stuckOn{}}, nil
}

func key(agent string) string { return "lease." + agent }

// Start takes every free lease placed here now and then keeps renewing
// and seeking them every RenewEvery until Stop. Renewing the leases held
// and seeking free ones are two loops: the callbacks of many gains (the
// first round takes every agent of a lone replica, and each OnAcquire
// restores it) never hold up the renewal of the leases already held.
func (m *Manager) Start(ctx context.Context) {
	m.mu.Lock()
	m.started = m.o.Clock.Now()
	m.mu.Unlock()
	m.armRenew(m.o.RenewEvery)
	m.round(ctx, m.free, m.stepOne)
	m.flushCalls() // the first round's OnAcquires have run
	m.arm()
}

// arm schedules the next round that seeks free leases.
func (m *Manager) arm() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done {
		return
	}
	m.timer = m.o.Clock.AfterFunc(m.o.RenewEvery, func() {
		m.round(context.Background(), m.free, m.stepOne)
		m.arm()
	})
}

// armRenew schedules the next renewal of the held leases in wait. Each
// is due RenewEvery after the previous one began, or at once if that one
// took longer.
func (m *Manager) armRenew(wait time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done {
		return
	}
	m.renewTimer = m.o.Clock.AfterFunc(wait, func() {
		began := m.o.Clock.Now()
		m.round(context.Background(), m.Held, m.renewOne)
		m.armRenew(max(0, m.o.RenewEvery-m.o.Clock.Now().Sub(began)))
	})
}

// free reports whether this replica does not hold the agent's lease.
func (m *Manager) free(agent string) bool { return !m.Held(agent) }

// Held reports whether this replica holds the agent's lease.
func (m *Manager) Held(agent string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.held[agent]
	return ok
}

// HeldAgents returns the agents whose leases this replica holds, sorted.
func (m *Manager) HeldAgents() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.held))
	for a := range m.held {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// Kick looks at one agent's lease now, on a goroutine of its own, instead
// of at the next round: a replica released it for this one. Before Start
// and after Stop it does nothing.
func (m *Manager) Kick(agent string) {
	if !m.known[agent] {
		return
	}
	m.mu.Lock()
	if m.done || m.started.IsZero() {
		m.mu.Unlock()
		return
	}
	m.wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		m.stepOne(context.Background(), agent)
	}()
}

// Rebalance runs a round now, on a goroutine of its own: the membership
// changed, so placements may have (and a replica that left an agent free
// may take it now). Calls while one runs fold into one more round. Before
// Start and after Stop it does nothing.
func (m *Manager) Rebalance() {
	m.mu.Lock()
	clear(m.stuck)
	if m.done || m.started.IsZero() {
		m.mu.Unlock()
		return // Start runs the first round
	}
	if m.rebalancing {
		m.again = true
		m.mu.Unlock()
		return
	}
	m.rebalancing = true
	m.wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		for {
			m.round(context.Background(), nil, m.stepOne)
			m.mu.Lock()
			if !m.again || m.done {
				m.rebalancing, m.again = false, false
				m.mu.Unlock()
				return
			}
			m.again = false
			m.mu.Unlock()
		}
	}()
}

// roundWorkers bounds how many agents' leases a round renews or seeks at
// once.
const roundWorkers = 16

// round renews held leases, takes free ones placed here, and starts or
// calls off handovers, for the agents pick picks (nil: all), with step
// (stepOne, or renewOne for a renewal round): roundWorkers agents at a
// time, so that renewing thousands of leases fits well inside
// TTL - RenewEvery.
func (m *Manager) round(ctx context.Context, pick func(agent string) bool, step func(ctx context.Context, agent string)) {
	next := make(chan string)
	var wg sync.WaitGroup
	for range min(roundWorkers, len(m.agents)) {
		wg.Go(func() {
			for a := range next {
				step(ctx, a)
			}
		})
	}
	for _, a := range m.agents {
		if pick == nil || pick(a) {
			next <- a
		}
	}
	close(next)
	wg.Wait()
}

// callLanes is how many agents' callbacks may run at once.
const callLanes = 8

func newCallLanes() []*callQueue {
	lanes := make([]*callQueue, callLanes)
	for i := range lanes {
		lanes[i] = newCallQueue()
	}
	return lanes
}

// callsOf is the agent's lane: its callbacks run there, in order.
func (m *Manager) callsOf(agent string) *callQueue {
	h := fnv.New32a()
	_, _ = h.Write([]byte(agent))
	return m.calls[h.Sum32()%uint32(len(m.calls))]
}

// flushCalls returns once every callback queued so far has run.
func (m *Manager) flushCalls() {
	var wg sync.WaitGroup
	for _, c := range m.calls {
		wg.Go(func() { c.now(func() {}) })
	}
	wg.Wait()
}

// callQueue runs queued calls one at a time, in order, on one goroutine.
type callQueue struct {
	mu      sync.Mutex
	q       []func()
	wake    chan struct{}
	stopped bool
	done    chan struct{}
}

func newCallQueue() *callQueue {
	c := &callQueue{wake: make(chan struct{}, 1), done: make(chan struct{})}
	go c.run()
	return c
}

func (c *callQueue) run() {
	defer close(c.done)
	for {
		c.mu.Lock()
		q, stopped := c.q, c.stopped
		c.q = nil
		c.mu.Unlock()
		for _, f := range q {
			f()
		}
		if len(q) > 0 {
			continue
		}
		if stopped {
			return
		}
		<-c.wake
	}
}

// later queues f after every call queued before it; once the queue is
// stopped, f runs at once.
func (c *callQueue) later(f func()) {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		f()
		return
	}
	c.q = append(c.q, f)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// now runs f after every call queued before it and returns when f has.
func (c *callQueue) now(f func()) {
	done := make(chan struct{})
	c.later(func() {
		defer close(done)
		f()
	})
	<-done
}

// stop runs what is queued and ends the goroutine.
func (c *callQueue) stop() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	<-c.done
}

// stepOne renews or seeks one agent's lease, tells the callbacks, and
// looks at its placement.
func (m *Manager) stepOne(ctx context.Context, agent string) {
	step := m.steps[agent]
	step.Lock()
	defer step.Unlock()
	m.stepLocked(ctx, agent)
}

// renewOne is stepOne for a renewal round: an agent whose step is busy
// (a handover releasing it, a seek or a kick just looking at it) is left
// to that step.
func (m *Manager) renewOne(ctx context.Context, agent string) {
	step := m.steps[agent]
	if !step.TryLock() {
		return
	}
	defer step.Unlock()
	m.stepLocked(ctx, agent)
}

// stepLocked is stepOne under the agent's step lock.
func (m *Manager) stepLocked(ctx context.Context, agent string) {
	ctx, cancel := context.WithTimeout(ctx, m.o.RenewEvery)
	gained, lost := m.renewOrSeek(ctx, agent)
	cancel()
	if gained {
		m.setOwner(agent, m.o.Holder)
		if m.o.OnAcquire != nil {
			m.callsOf(agent).later(func() { m.o.OnAcquire(agent) })
		}
	}
	if lost {
		m.setOwner(agent, "")
		if m.o.OnLose != nil {
			m.callsOf(agent).later(func() { m.o.OnLose(agent, Lost) })
		}
	}
	if m.Held(agent) {
		m.placeHeld(agent)
	}
}

// renewOrSeek renews or seeks one agent's lease. Callers hold its step.
func (m *Manager) renewOrSeek(ctx context.Context, agent string) (gained, lost bool) {
	m.mu.Lock()
	h, holding := m.held[agent]
	done := m.done
	m.mu.Unlock()
	if done {
		return false, false
	}
	now := m.o.Clock.Now()
	mine, _ := json.Marshal(record{Holder: m.o.Holder, Expires: now.Add(m.o.TTL)})
	if holding {
		newRev, err := m.o.Store.Update(ctx, key(agent), mine, h.rev)
		switch {
		case err == nil:
			m.setHeld(agent, hold{rev: newRev, renewed: now})
			return false, false
		case errors.Is(err, store.ErrConflict):
			// The record changed since our last confirmed renewal: maybe
			// another replica's write, maybe our own renewal whose reply
			// was lost (a timeout or reconnect after the server applied
			// it). Read it to tell which.
			return false, m.recheck(ctx, agent, h, now, mine)
		case errors.Is(err, store.ErrNotFound):
			return false, m.lose(agent)
		}
		return false, m.unconfirmed(agent, h, now, err)
	}
	rec, err := m.o.Store.Get(ctx, key(agent))
	found := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return false, false
	}
	var cur record
	if found && json.Unmarshal(rec.Value, &cur) != nil {
		cur = record{} // unreadable: free
	}
	if found && cur.Holder != "" && cur.Holder != m.o.Holder && now.Before(cur.Expires) {
		m.setOwner(agent, cur.Holder)
		m.expectExpiry(agent, cur, now)
		return false, false // held by a live replica
	}
	if !m.mayTake(agent, cur, found, now) {
		m.setOwner(agent, "")
		return false, false
	}
	if !found {
		newRev, err := m.o.Store.Create(ctx, key(agent), mine, 0)
		if err != nil {
			return false, false // another replica was quicker, or the store is down
		}
		m.setHeld(agent, hold{rev: newRev, renewed: now})
		m.o.Log.Info("lease taken", "agent", agent, "holder", m.o.Holder)
		return true, false
	}
	newRev, err := m.o.Store.Update(ctx, key(agent), mine, rec.Revision)
	if err != nil {
		return false, false
	}
	m.setHeld(agent, hold{rev: newRev, renewed: now})
	if cur.Holder == "" {
		m.o.Log.Info("lease taken", "agent", agent, "holder", m.o.Holder, "released_for", cur.To)
	} else {
		m.o.Log.Info("lease taken over", "agent", agent, "holder", m.o.Holder, "previous", cur.Holder, "expired", cur.Expires)
	}
	return true, false
}

// mayTake decides whether this replica takes a free lease (absent,
// released, expired, or its own from before a restart).
func (m *Manager) mayTake(agent string, cur record, found bool, now time.Time) bool {
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
	if found && cur.Expires.After(since) {
		since = cur.Expires
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
// expires, if the agent is placed here: its holder may have died, and the
// lease should move as soon as it is free rather than at the next round.
func (m *Manager) expectExpiry(agent string, cur record, now time.Time) {
	if m.o.Assign == nil || m.o.Assign(agent).Owner != m.o.Holder {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done || m.expiry[agent] != nil {
		return
	}
	m.expiry[agent] = m.o.Clock.AfterFunc(cur.Expires.Sub(now)+10*time.Millisecond, func() {
		m.mu.Lock()
		delete(m.expiry, agent)
		m.mu.Unlock()
		if !m.Held(agent) {
			m.Kick(agent)
		}
	})
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
	step := m.steps[agent]
	step.Lock()
	defer step.Unlock()
	m.mu.Lock()
	hd, holding := m.held[agent]
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
	m.expire(ectx, agent, hd.rev, h.to)
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

// recheck settles a renewal that conflicted. The lease is lost only if
// its record is gone or names another holder (or has expired); a record
// that still names this replica is our own renewal whose reply we never
// got, and we keep the lease and renew it once more. It reports whether
// the lease was lost.
func (m *Manager) recheck(ctx context.Context, agent string, h hold, now time.Time, mine []byte) (lost bool) {
	for range 3 {
		rec, err := m.o.Store.Get(ctx, key(agent))
		if errors.Is(err, store.ErrNotFound) {
			return m.lose(agent)
		}
		if err != nil {
			return m.unconfirmed(agent, h, now, err)
		}
		var cur record
		if json.Unmarshal(rec.Value, &cur) != nil || cur.Holder != m.o.Holder {
			return m.lose(agent, "current", cur.Holder)
		}
		if !now.Before(cur.Expires) {
			m.o.Log.Warn("lease expired before its renewal was confirmed; letting the agent go", "agent", agent, "expired", cur.Expires)
			m.drop(agent)
			return true
		}
		// Fencing: the record names us and has not expired, so it is our
		// own renewal. Holder is unique to this replica, and no other
		// replica writes over a live lease (it takes one only after
		// expiry, and its record then names it). So nobody else has
		// written the key since our lost renewal, and its current
		// revision is exactly the token that renewal would have returned
		// had its reply arrived. Adopting it fences no less than before:
		// any later write by another holder changes the revision and
		// fails our next compare-and-set. Adopting a revision whose
		// record names anyone else would be unsafe, and is a loss above.
		// The record's expiry, not our clock, dates this confirmed
		// renewal, so we still let go in time if the store stays out of
		// reach.
		h = hold{rev: rec.Revision, renewed: cur.Expires.Add(-m.o.TTL)}
		m.setHeld(agent, h)
		m.o.Log.Info("lease renewal had already been applied; keeping it", "agent", agent, "revision", rec.Revision)
		newRev, err := m.o.Store.Update(ctx, key(agent), mine, rec.Revision)
		switch {
		case err == nil:
			m.setHeld(agent, hold{rev: newRev, renewed: now})
			return false
		case errors.Is(err, store.ErrNotFound):
			return m.lose(agent)
		case !errors.Is(err, store.ErrConflict):
			return m.unconfirmed(agent, h, now, err)
		}
		// Written again between our read and our write: read again.
	}
	return m.lose(agent)
}

// unconfirmed handles a renewal whose outcome is unknown (the store is
// unreachable, or the request timed out and may yet have been applied):
// we cannot prove we still hold the lease, so we keep it only until
// TTL - RenewEvery after the last confirmed renewal, letting go before
// another replica could take it over. It reports whether we let go.
func (m *Manager) unconfirmed(agent string, h hold, now time.Time, err error) (lost bool) {
	m.o.Log.Error("lease renewal failed", "agent", agent, "error", err)
	if now.Sub(h.renewed) >= m.o.TTL-m.o.RenewEvery {
		m.o.Log.Warn("lease could not be renewed in time; letting the agent go", "agent", agent)
		m.drop(agent)
		return true
	}
	return false
}

// lose lets the agent go because its lease is gone or another replica
// holds it.
func (m *Manager) lose(agent string, attrs ...any) (lost bool) {
	m.o.Log.Warn("lease lost to another replica; letting the agent go", append([]any{"agent", agent, "holder", m.o.Holder}, attrs...)...)
	m.drop(agent)
	return true
}

func (m *Manager) setHeld(agent string, h hold) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.held[agent] = h
}

// drop forgets a held lease and calls off its handover, if any.
func (m *Manager) drop(agent string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.held, agent)
	if h := m.handing[agent]; h != nil {
		h.off = true
		h.cancel()
	}
}

// setOwner records who holds the agent and tells OnOwner of a change.
func (m *Manager) setOwner(agent, holder string) {
	m.mu.Lock()
	prev, seen := m.owners[agent]
	m.owners[agent] = holder
	m.mu.Unlock()
	if (!seen || prev != holder) && m.o.OnOwner != nil {
		m.o.OnOwner(agent, holder)
	}
}

// Stop stops renewing, calls off handovers in progress, and releases held
// leases (their agents are told Released first) so another replica can
// take them at once: each is expired naming the replica it is placed on,
// and OnReleased is told.
func (m *Manager) Stop(ctx context.Context) {
	m.mu.Lock()
	m.done = true
	if m.renewTimer != nil {
		m.renewTimer.Stop()
	}
	if m.timer != nil {
		m.timer.Stop()
	}
	for a, t := range m.expiry {
		t.Stop()
		delete(m.expiry, a)
	}
	for _, h := range m.handing {
		h.off = true
		h.cancel()
	}
	m.mu.Unlock()
	m.wg.Wait()
	// A round that began before done was set may still be renewing: each
	// agent's step is taken before its lease is released.
	for _, a := range m.agents {
		m.release(ctx, a)
	}
	for _, c := range m.calls {
		c.stop()
	}
}

// release lets a held agent go and expires its lease, for Stop.
func (m *Manager) release(ctx context.Context, a string) {
	step := m.steps[a]
	step.Lock()
	defer step.Unlock()
	m.mu.Lock()
	h, ok := m.held[a]
	delete(m.held, a)
	m.mu.Unlock()
	if !ok {
		return
	}
	if m.o.OnLose != nil {
		m.callsOf(a).now(func() { m.o.OnLose(a, Released) })
	}
	to := ""
	if m.o.Assign != nil {
		if to = m.o.Assign(a).Owner; to == m.o.Holder {
			to = ""
		}
	}
	m.expire(ctx, a, h.rev, to)
	if m.o.OnReleased != nil {
		m.o.OnReleased(a, to)
	}
}
