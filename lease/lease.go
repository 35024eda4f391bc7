// Package lease gives each agent exactly one owner among the worker
// replicas that share a store: a replica runs an agent's turns, consumes
// its messages and fires its timers only while it holds the agent's lease.
// It must not decide what an owner does.
//
// Two kinds of record make a lease. Each replica keeps a replica record
// (replicaKey: its holder name and an expiry), renewed every RenewEvery
// with compare-and-set — one write per replica, however many agents it
// holds. Each agent has a lease record (lease.<agent>) naming its holder;
// it is written only when the lease changes hands (taken, released,
// handed over), with compare-and-set, so the store's revision of the key
// is a fencing token. A lease lasts as long as its holder's replica
// record: another replica takes it only once that record has expired (or
// is gone), read fresh from the store. Before, every lease was renewed on
// its own: 10,000 agents cost 2,000 writes a second and a tenth of a core
// while every agent slept.
//
// A renewal that fails with a conflict is settled by reading the record:
// one that still names this replica is its own renewal that the store
// applied but whose reply was lost (a timeout or a reconnect); the replica
// adopts that record's revision and keeps its leases. Renewals go through
// Options.Renewal (a connection of their own) on a timer that does
// nothing else, so bulk work never makes them late. A replica that could
// not renew its record for TTL - RenewEvery lets every agent go at once,
// before another replica could take one (lapse.go); once renewed again
// it takes back the leases that still name it, as never moved when their
// revision is the one it held. A replica's lease records are read back a
// few at a time (all of them every verifyRounds renewals): one found gone,
// naming another holder or at another revision (written by hand, or a
// store that lost writes) is a loss.
//
// Fencing. A lease's revision is its fencing token (Fence): the owner
// writes the agent's state under it (store.Store.Fenced), so the store
// refuses what a holder frozen past its lease writes once it wakes. Every
// gain claims its fence in the store (store.Store.Claim) before
// OnAcquire, and Fence turns false the moment a renewal is overdue on
// this process's clock, before any renewal has run.
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
// provided replicas' clocks differ by less than TTL - RenewEvery, each
// replica's Holder is unique, and nothing but this package writes lease
// records; when a holder dies, another replica takes over within TTL +
// RenewEvery (with Assign: provided the others drop the dead replica from
// their membership within that time too); a renewal whose reply is lost
// does not cost the holder its leases; a handover never cancels a running
// turn, and is called off if the placement changes again before it
// completes. Not guaranteed: a holder cut off from the store keeps running
// until a renewal round finds TTL - RenewEvery passed since its last
// confirmed renewal (one the store is known to have applied); a lease
// record changed behind this package's back (by hand, or a store that lost
// writes) is noticed by its holder within verifyRounds renewals, not at
// once; a handover is not bounded in time (it waits for the running turn,
// which its turn timeout bounds); a lost lease still cancels the running
// turn at once (fencing). A replica that crashes leaves its replica record
// behind (a few bytes per holder name; a stopped one deletes its own).
// A replica of a version before replica records never takes a lease held
// by one of this version, so during a rolling upgrade a new replica's
// agents move only to new replicas.
package lease

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
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
	// Lapsed: this replica's record was not renewed in time (the store
	// was out of reach, or the process was frozen or starved), so it let
	// every agent go at once, before another replica could take one; it
	// takes back at once those nobody took (Gain.Moved false). The
	// running turn is cancelled at once, as for Lost.
	Lapsed Reason = "lapsed"
)

// Gain is how this replica came to hold an agent's lease, for OnAcquire.
type Gain struct {
	// Fence is the lease's fencing token: the agent's writes are made
	// under it (store.Store.Fenced), and it is claimed in the store
	// before OnAcquire is told.
	Fence store.Fence
	// Moved: the lease changed hands since this replica last held it
	// (another replica held it, even briefly; it was released; or this
	// process never held it), so the agent's state must be read from the
	// store before it runs here. False only for a lease that never left
	// this holder: taken back after a lapse that nobody used, when what
	// this process holds of the agent is still the store's truth.
	Moved bool
}

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
	// Renewal is the store this replica's record is renewed through:
	// the same state as Store, on a connection of its own, so that a
	// renewal never queues behind the agents' bulk writes and reads (a
	// burst, thousands of restores). Nil: Store.
	Renewal store.Store
	// Live says whether this replica can do its agents' work at all (its
	// main connection is up); while it returns an error the record is not
	// renewed (a failed renewal), so a replica that lost its main
	// connection but not Renewal's lets its agents go as one cut off from
	// the store does. It must be quick and must not block. Nil: always.
	Live  func() error
	Clock clock.Clock
	Log   *slog.Logger
	// Holder names this replica (host, pid, random); required, and unique
	// among the replicas: a record naming it is taken to be this
	// replica's own write.
	Holder string
	// TTL is how long a lease outlives its holder's last renewal of its
	// replica record. Default 15s.
	TTL time.Duration
	// RenewEvery is how often this replica's record is renewed and free
	// leases sought. Default TTL/3.
	RenewEvery time.Duration
	// OnAcquire and OnLose are told when this replica gains or loses an
	// agent. One agent's run one at a time, in order; different agents'
	// may run at once (up to callLanes), on goroutines of the Manager's (a
	// renewal does not wait for them; Start returns once the first round's
	// OnAcquires have run). They must not block for long.
	// OnLose with HandedOver follows a successful OnDrain: nothing runs
	// for the agent any more. A lost lease is fenced at once (Held is
	// false) even while its OnLose waits behind others.
	OnAcquire func(agent string, g Gain)
	OnLose    func(agent string, why Reason)
	// OnRenewed is told how long each renewal of this replica's record
	// took, and its error (nil: renewed), for a metric. It must not
	// block.
	OnRenewed func(took time.Duration, err error)
	// OnLetGo is told each time this replica lets every agent go at
	// once (why: "late_renewal", "record_gone" or "holder_conflict"),
	// with how many it held. It must not block.
	OnLetGo func(why string, agents int)
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
	// Replica: the lease lasts as long as its holder's replica record
	// (replicaKey) does, and Expires is far in the future (heldForever),
	// so that a replica of an older version, which reads Expires only,
	// never takes it from a live holder. Without it (older versions,
	// released leases) the lease lasts until Expires.
	Replica bool `json:"replica,omitempty"`
}

// Manager holds this replica's leases.
type Manager struct {
	o Options
	// agents (sorted, replaced whole: a round iterates its copy), known
	// and steps change with a reload (Learn, Forget) and are read under
	// mu (agents.go); a step's mutex is never dropped.
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
	// renewing serialises the renewals of this replica's record.
	renewing sync.Mutex

	mu sync.Mutex
	// self is this replica's record: its revision (0: none known) and
	// its last confirmed renewal.
	self hold
	// held are the leases this replica holds: agent → the revision of
	// its lease record (the fencing token).
	held map[string]uint64
	// lastHeld is, per agent, the revision of its lease record when
	// this replica last held it: a lease taken back at that revision
	// never left (Gain.Moved false).
	lastHeld map[string]uint64
	// losing are agents let go at a lapse (fenceAll) whose OnLose is not
	// queued yet: the next step of each queues it, before any gain.
	losing map[string]bool
	// lapse is the let-go being recovered from (lapse.go);
	// unmovedGains counts the leases taken back that never left, for
	// its summary line.
	lapse        lapse
	unmovedGains atomic.Int64
	// heldList is held's agents, sorted (nil: to be made again).
	heldList []string
	handing  map[string]*handover
	owners   map[string]string
	// lives are other replicas' records as last read.
	lives  map[string]life
	expiry map[string]clock.Timer // kicks armed for when a lease expires
	// stuck: agents taken because the replica they are placed on left
	// them free for a TTL; not handed back to it until the membership
	// changes (Rebalance) or stuckFor passes.
	stuck map[string]stuckOn
	timer clock.Timer // the next round seeking free leases
	// renewTimer is the next renewal of this replica's record.
	renewTimer clock.Timer
	// verified is where the read-back of held leases goes on.
	verified string
	done     bool
	started  time.Time
	// rebalancing: a Rebalance round runs; again: another was asked for.
	rebalancing, again bool
	wg                 sync.WaitGroup
}

// hold is this replica's record as last confirmed: its revision, and
// when it was renewed, by the time its expiry was reckoned from (a
// renewal counts only once the store is known to have applied it).
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
	if o.Renewal == nil {
		o.Renewal = o.Store
	}
	return &Manager{o: o, agents: as, known: known, steps: steps, calls: newCallLanes(), held: map[string]uint64{},
		lastHeld: map[string]uint64{}, losing: map[string]bool{}, handing: map[string]*handover{},
		owners: map[string]string{}, lives: map[string]life{}, expiry: map[string]clock.Timer{}, stuck: map[string]stuckOn{}}, nil
}

func key(agent string) string { return "lease." + agent }

// Start renews this replica's record, takes every free lease placed here
// now, and then keeps renewing the record and tending the leases every
// RenewEvery until Stop. The renewals and the tending are two loops that
// share nothing but a few fields under mu: a renewal is one write of
// this replica's record (through Options.Renewal) and never waits for a
// round over the agents, a step, a callback or a restore.
func (m *Manager) Start(ctx context.Context) {
	m.mu.Lock()
	m.started = m.o.Clock.Now()
	m.mu.Unlock()
	m.renewSelf(ctx)
	m.armRenew(m.o.RenewEvery)
	m.round(ctx, m.free, m.stepOne)
	m.flushCalls() // the first round's OnAcquires have run
	m.arm(m.o.RenewEvery)
}

// arm schedules the next tending round in wait: it seeks free leases,
// reads back a few held ones and looks at where the held agents are
// placed.
func (m *Manager) arm(wait time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done {
		return
	}
	m.timer = m.o.Clock.AfterFunc(wait, func() {
		ctx := context.Background()
		m.round(ctx, m.free, m.stepOne)
		m.verifySome(ctx)
		if m.o.Assign != nil { // placements exist to look at
			m.round(ctx, m.Held, m.placeOne)
		}
		m.arm(m.o.RenewEvery)
	})
}

// armRenew schedules the next renewal of this replica's record in wait.
// Each is due RenewEvery after the previous one began, or at once if that
// one took longer. A renewal that let every agent go (fenceAll) hands the
// let-go and the taking back to a goroutine of its own (recover).
func (m *Manager) armRenew(wait time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done {
		return
	}
	m.renewTimer = m.o.Clock.AfterFunc(wait, func() {
		began := m.o.Clock.Now()
		if m.renewSelf(context.Background()) {
			m.o.Clock.AfterFunc(0, m.recover)
		}
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
// The slice is shared until the held set changes: callers must not
// modify it. (Sorting 10,000 names for every heartbeat was a fifth of
// an idle replica's CPU.)
func (m *Manager) HeldAgents() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.heldList == nil {
		out := make([]string, 0, len(m.held))
		for a := range m.held {
			out = append(out, a)
		}
		sort.Strings(out)
		m.heldList = out
	}
	return m.heldList
}

// Kick looks at one agent's lease now, on a goroutine of its own, instead
// of at the next round: a replica released it for this one. Before Start
// and after Stop it does nothing.
func (m *Manager) Kick(agent string) {
	if !m.knows(agent) {
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

// roundWorkers bounds how many agents' leases a round looks at at once.
const roundWorkers = 16

// round takes free leases placed here, and starts or calls off
// handovers, for the agents pick picks (nil: all), with step (stepOne,
// or placeOne for the held agents at a renewal): roundWorkers agents at a
// time, so that a round over thousands of agents takes a few store round
// trips, not one per agent.
func (m *Manager) round(ctx context.Context, pick func(agent string) bool, step func(ctx context.Context, agent string)) {
	next := make(chan string)
	var wg sync.WaitGroup
	agents := m.agentList()
	for range min(roundWorkers, len(agents)) {
		wg.Go(func() {
			for a := range next {
				step(ctx, a)
			}
		})
	}
	for _, a := range agents {
		if pick == nil || pick(a) {
			next <- a
		}
	}
	close(next)
	wg.Wait()
}

func (m *Manager) setHeld(agent string, rev uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.held[agent]; !ok {
		m.heldList = nil
	}
	m.held[agent] = rev
	m.lastHeld[agent] = rev
}

// Fence returns the fencing token of the agent's lease if this replica
// holds it and its record's last confirmed renewal is recent enough
// (less than TTL - RenewEvery ago, on this process's monotonic clock) that
// no other replica can have taken it. Writes of the agent's state are
// made under it; ok false means this replica must write nothing of the
// agent. Unlike Held it turns false the moment a renewal is overdue,
// before any renewal round runs: a process that wakes from a freeze
// knows at once that its leases are in doubt.
func (m *Manager) Fence(agent string) (f store.Fence, ok bool) {
	now := m.o.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	rev, held := m.held[agent]
	if !held || m.self.rev == 0 || now.Sub(m.self.renewed) >= m.o.TTL-m.o.RenewEvery {
		return store.Fence{}, false
	}
	return store.Fence{Key: key(agent), Revision: rev}, true
}

// drop forgets a held lease and calls off its handover, if any.
func (m *Manager) drop(agent string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.held[agent]; ok {
		delete(m.held, agent)
		m.heldList = nil
	}
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
// and OnReleased is told. Then it deletes this replica's record: a lease
// that could not be released is free at once too.
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
	// A round that began before done was set may still be looking at an
	// agent: each agent's step is taken before its lease is released.
	for _, a := range m.agentList() {
		m.release(ctx, a)
	}
	for _, c := range m.calls {
		c.stop()
	}
	m.renewing.Lock() // a renewal under way ends first
	defer m.renewing.Unlock()
	if err := m.o.Renewal.Delete(ctx, replicaKey(m.o.Holder)); err != nil {
		m.o.Log.Warn("could not delete this replica's record; leases not released expire with it", "error", err)
	}
}

// release lets a held agent go and expires its lease, for Stop.
func (m *Manager) release(ctx context.Context, a string) {
	step := m.step(a)
	step.Lock()
	defer step.Unlock()
	m.mu.Lock()
	rev, ok := m.held[a]
	m.mu.Unlock()
	if !ok {
		return
	}
	m.drop(a)
	if m.o.OnLose != nil {
		m.callsOf(a).now(func() { m.o.OnLose(a, Released) })
	}
	to := ""
	if m.o.Assign != nil {
		if to = m.o.Assign(a).Owner; to == m.o.Holder {
			to = ""
		}
	}
	m.expire(ctx, a, rev, to)
	if m.o.OnReleased != nil {
		m.o.OnReleased(a, to)
	}
}
