// Package membership tells the worker replicas that share a NATS about
// each other, and divides the agents among the replicas it knows to be
// alive (Assign). It must not take or release leases: the lease package
// does, and asks this one only where an agent belongs.
//
// Every replica publishes a heartbeat on one subject (<prefix>._members)
// every Interval, naming itself (its lease holder name), when it started,
// how often it beats and the agents it holds, and subscribes to the same
// subject. A member is live from its first heartbeat until it says it is
// leaving, or until none of its heartbeats has arrived for DeadAfter
// (3 of its intervals). A replica that sees a member it did not know
// announces itself at once, so a newcomer learns the others within a round
// trip instead of an interval. The same subject carries "released"
// notices: a replica that lets an agent go for another names it, and that
// one takes the lease at once instead of at its next lease round.
//
// Guarantees: a replica always counts itself among the live members until
// it leaves; a member that stops (Leave) is dropped by the others as soon
// as its leaving notice arrives, and one that dies or is cut off from NATS
// within DeadAfter plus one interval; the live set every replica computes
// converges once heartbeats flow again.
// Not guaranteed: that replicas agree at every instant (views differ
// during joins, deaths and partitions, so assignment may briefly differ;
// leases, not membership, keep one owner per agent); delivery of any one
// heartbeat or notice (core NATS, at most once).
package membership

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/natsbus/subject"
)

// Subject returns the membership subject under a subject prefix.
func Subject(prefix string) string { return prefix + "." + subject.MembersToken }

// DefaultInterval is the heartbeat interval when Options.Interval is 0.
const DefaultInterval = time.Second

// Misses is how many heartbeats of a member may go missing before the
// others drop it.
const Misses = 3

// Options configure a Members.
type Options struct {
	Conn    *nats.Conn // required
	Subject string     // required: Subject(prefix)
	// Holder is this replica's name (lease.holder); required and unique.
	Holder string
	// Interval between heartbeats. Default DefaultInterval.
	Interval time.Duration
	Clock    clock.Clock
	Log      *slog.Logger
	// Held returns the agents this replica holds, for its heartbeats.
	Held func() []string
	// OnChange is told when the live set changed (a member joined, left or
	// was dropped). It runs on the subscription's goroutine and must not
	// block.
	OnChange func()
	// OnReleased is told when another member released agent for this
	// replica to take. Same goroutine, must not block.
	OnReleased func(agent, from string)
}

// Member is one live replica as this one sees it.
type Member struct {
	Holder string `json:"holder"`
	// Started is when the member started (its own clock).
	Started time.Time `json:"started"`
	// Agents are the agents it held at its last heartbeat.
	Agents []string `json:"agents,omitempty"`
	// Seen is when its last heartbeat arrived (this replica's clock).
	Seen     time.Time     `json:"seen"`
	interval time.Duration // its heartbeat interval
}

// message is what travels on the membership subject.
type message struct {
	// Kind is heartbeat, leaving or released.
	Kind       string    `json:"kind"`
	Holder     string    `json:"holder"`
	Started    time.Time `json:"started,omitzero"`
	IntervalMS int64     `json:"interval_ms,omitempty"`
	Agents     []string  `json:"agents,omitempty"`
	// Join marks a newcomer's first heartbeat: everyone answers with
	// theirs at once.
	Join bool `json:"join,omitempty"`
	// Same: Agents are omitted, as in the sender's last heartbeat that
	// listed them (a heartbeat lists them when they changed, every
	// listEvery beats, and to a newcomer).
	Same bool `json:"same,omitempty"`
	// Agent and To: a released notice, for To to take Agent.
	Agent string `json:"agent,omitempty"`
	To    string `json:"to,omitempty"`
}

const (
	kindHeartbeat = "heartbeat"
	kindLeaving   = "leaving"
	kindReleased  = "released"
)

// Members is this replica's view of the live replicas. Its methods are
// safe for concurrent use.
type Members struct {
	o       Options
	started time.Time
	sub     *nats.Subscription

	mu      sync.Mutex
	others  map[string]*Member
	version uint64
	timer   clock.Timer
	// beats counts heartbeats; listed is the agents the last one that
	// listed them listed.
	beats  int
	listed []string
	left   bool
}

// Start joins: it subscribes, announces this replica and waits briefly
// (a quarter of the interval, at most 250ms) for the others to answer, so
// the first assignment already counts them. Then it beats every Interval
// until Leave.
func Start(ctx context.Context, o Options) (*Members, error) {
	if o.Conn == nil || o.Subject == "" || o.Holder == "" {
		return nil, errors.New("membership: a NATS connection, a subject and a holder name are required")
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	m := &Members{o: o, started: o.Clock.Now(), others: map[string]*Member{}}
	sub, err := o.Conn.Subscribe(o.Subject, m.receive)
	if err != nil {
		return nil, err
	}
	m.sub = sub
	m.beat(true, true)
	flushCtx, cancel := context.WithTimeout(ctx, max(o.Interval, time.Second))
	err = o.Conn.FlushWithContext(flushCtx)
	cancel()
	if err != nil {
		o.Log.Warn("membership: could not announce this replica; it will keep trying", "error", err)
	}
	wait := min(o.Interval/4, 250*time.Millisecond)
	t := time.NewTimer(wait)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	m.arm()
	return m, nil
}

// Holder returns this replica's name.
func (m *Members) Holder() string { return m.o.Holder }

// Started returns when this replica joined (its heartbeats' start time).
func (m *Members) Started() time.Time { return m.started }

// Live returns the names of the live members, this replica included
// (until Leave), sorted.
func (m *Members) Live() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.others)+1)
	if !m.left {
		out = append(out, m.o.Holder)
	}
	for h := range m.others {
		out = append(out, h)
	}
	sort.Strings(out)
	return out
}

// Version changes whenever the live set does, so an assignment can be
// cached until it changes.
func (m *Members) Version() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.version
}

// Members returns the other live members, sorted by name.
func (m *Members) Members() []Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Member, 0, len(m.others))
	for _, x := range m.others {
		c := *x
		c.Agents = slices.Clone(x.Agents)
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Holder < out[j].Holder })
	return out
}

// Released tells member to that this replica has just released agent's
// lease for it, so it takes the agent at once.
func (m *Members) Released(agent, to string) {
	if to == "" || to == m.o.Holder {
		return
	}
	m.publish(message{Kind: kindReleased, Holder: m.o.Holder, Agent: agent, To: to})
}

// Leave stops the heartbeats and tells the others this replica is
// leaving, so they drop it at once. The subscription stays until Close,
// and Live no longer names this replica.
func (m *Members) Leave() {
	m.mu.Lock()
	if m.left {
		m.mu.Unlock()
		return
	}
	m.left = true
	m.version++
	if m.timer != nil {
		m.timer.Stop()
	}
	m.mu.Unlock()
	m.publish(message{Kind: kindLeaving, Holder: m.o.Holder, Started: m.started})
	_ = m.o.Conn.FlushTimeout(time.Second)
	m.o.Log.Info("membership: left", "holder", m.o.Holder)
}

// Close leaves (if not yet) and unsubscribes.
func (m *Members) Close() {
	m.Leave()
	if m.sub != nil {
		_ = m.sub.Unsubscribe()
	}
}

func (m *Members) arm() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.left {
		return
	}
	m.timer = m.o.Clock.AfterFunc(m.o.Interval, func() {
		m.beat(false, false)
		m.sweep()
		m.arm()
	})
}

// beat publishes this replica's heartbeat; full: with the agents held,
// changed or not.
func (m *Members) beat(join, full bool) {
	m.mu.Lock()
	left := m.left
	m.mu.Unlock()
	if left {
		return
	}
	msg := message{Kind: kindHeartbeat, Holder: m.o.Holder, Started: m.started, IntervalMS: m.o.Interval.Milliseconds(), Join: join}
	if m.o.Held != nil {
		held := m.o.Held()
		m.mu.Lock()
		m.beats++
		if full || m.beats%listEvery == 0 || !slices.Equal(held, m.listed) {
			msg.Agents, m.listed = held, held
		} else {
			msg.Same = true
		}
		m.mu.Unlock()
	}
	m.publish(msg)
}

// listEvery is how often a heartbeat lists the agents held although they
// did not change: at 10,000 agents a list is 150 KB of JSON, once a
// second to every replica.
const listEvery = 30

func (m *Members) publish(msg message) {
	data, err := json.Marshal(msg)
	if err != nil {
		return
	}
	if err := m.o.Conn.Publish(m.o.Subject, data); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		m.o.Log.Debug("membership: publish failed", "kind", msg.Kind, "error", err)
	}
}

// sweep drops members not heard from for Misses of their intervals.
func (m *Members) sweep() {
	now := m.o.Clock.Now()
	var gone []string
	m.mu.Lock()
	for h, x := range m.others {
		if now.Sub(x.Seen) > time.Duration(Misses)*x.interval {
			delete(m.others, h)
			gone = append(gone, h)
		}
	}
	if len(gone) > 0 {
		m.version++
	}
	m.mu.Unlock()
	for _, h := range gone {
		m.o.Log.Warn("membership: replica gone (no heartbeat)", "replica", h, "misses", Misses)
	}
	if len(gone) > 0 && m.o.OnChange != nil {
		m.o.OnChange()
	}
}

// receive handles one message of the subject.
func (m *Members) receive(nm *nats.Msg) {
	var msg message
	if err := json.Unmarshal(nm.Data, &msg); err != nil || msg.Holder == "" {
		return
	}
	if msg.Holder == m.o.Holder {
		if msg.Kind == kindHeartbeat && !msg.Started.Equal(m.started) {
			m.o.Log.Error("membership: another replica uses this replica's lease.holder; holders must be unique", "holder", msg.Holder, "its_start", msg.Started, "our_start", m.started)
		}
		return
	}
	switch msg.Kind {
	case kindHeartbeat:
		m.heard(msg)
	case kindLeaving:
		m.mu.Lock()
		_, known := m.others[msg.Holder]
		delete(m.others, msg.Holder)
		if known {
			m.version++
		}
		m.mu.Unlock()
		if known {
			m.o.Log.Info("membership: replica left", "replica", msg.Holder)
			if m.o.OnChange != nil {
				m.o.OnChange()
			}
		}
	case kindReleased:
		if msg.To == m.o.Holder && msg.Agent != "" && m.o.OnReleased != nil {
			m.o.OnReleased(msg.Agent, msg.Holder)
		}
	}
}

func (m *Members) heard(msg message) {
	interval := time.Duration(msg.IntervalMS) * time.Millisecond
	if interval <= 0 {
		interval = DefaultInterval
	}
	now := m.o.Clock.Now()
	m.mu.Lock()
	if m.left {
		m.mu.Unlock()
		return
	}
	x, known := m.others[msg.Holder]
	if !known {
		x = &Member{Holder: msg.Holder}
		m.others[msg.Holder] = x
		m.version++
	}
	x.Started, x.Seen, x.interval = msg.Started, now, interval
	if !msg.Same {
		x.Agents = msg.Agents
	}
	m.mu.Unlock()
	if !known {
		m.o.Log.Info("membership: replica joined", "replica", msg.Holder, "started", msg.Started)
	}
	if msg.Join || !known {
		// A newcomer (or one we had dropped) learns of us now, not at our
		// next beat.
		m.beat(false, true)
	}
	if !known && m.o.OnChange != nil {
		m.o.OnChange()
	}
}

// Assigner caches Assign over the live members for a fixed set of agents.
type Assigner struct {
	members  *Members
	agents   []string
	affinity map[string]string

	mu      sync.Mutex
	version uint64
	cached  map[string]Placement
	valid   bool
}

// NewAssigner returns an Assigner of agents over members' live set;
// affinity maps agents to their replica_affinity glob.
func NewAssigner(members *Members, agents []string, affinity map[string]string) *Assigner {
	return &Assigner{members: members, agents: slices.Clone(agents), affinity: affinity}
}

// Place returns where the current live set puts agent.
func (a *Assigner) Place(agent string) Placement {
	v := a.members.Version()
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.valid || v != a.version {
		a.cached = Assign(a.agents, a.members.Live(), a.affinity)
		a.version, a.valid = v, true
	}
	return a.cached[agent]
}
