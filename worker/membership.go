package worker

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/lease"
	"github.com/agent-worker/agent-worker/membership"
)

// spread is how this replica shares the agents with the others: the
// membership (who is live), the placement of each agent over the live
// replicas, and the lease callbacks that move an agent in and out of this
// replica. It holds wiring only: membership decides who is live and where
// an agent belongs, lease when it moves, the driver and the binding what
// moving means for turns and messages.
type spread struct {
	w        *Worker
	log      *slog.Logger
	holder   string
	affinity map[string]string // agent → replica_affinity
	members  atomic.Pointer[membership.Members]
	leases   atomic.Pointer[lease.Manager]
	assigner atomic.Pointer[membership.Assigner]
}

// init readies s for w (before the lease manager and the membership
// start: their callbacks read these fields).
func (s *spread) init(w *Worker, cfg *config.Config, log *slog.Logger) {
	s.w, s.log, s.holder, s.affinity = w, log, holderName(cfg), map[string]string{}
	for _, a := range cfg.Agents {
		if a.ReplicaAffinity != "" {
			s.affinity[a.Name] = a.ReplicaAffinity
		}
	}
}

// startMembership joins the replicas on the worker's NATS and places the
// agents over the live ones. Lease changes follow membership changes at
// once: a join or a leave runs a lease round, a released notice a step.
func (s *spread) startMembership(ctx context.Context, cfg *config.Config, names []string, leases *lease.Manager) error {
	m, err := membership.Start(ctx, membership.Options{
		Conn: s.w.conn.NC, Subject: membership.Subject(cfg.NATS.SubjectPrefix),
		Holder: s.holder, Interval: cfg.Lease.Heartbeat.D(), Log: s.log,
		Held:       leases.HeldAgents,
		OnChange:   leases.Rebalance,
		OnReleased: func(agent, _ string) { leases.Kick(agent) },
	})
	if err != nil {
		return err
	}
	s.members.Store(m)
	s.leases.Store(leases)
	s.assigner.Store(membership.NewAssigner(m, names, s.affinity))
	return nil
}

// place is lease.Options.Assign: where the live replicas put the agent,
// and whether this replica may take it if that one leaves it free.
func (s *spread) place(agent string) lease.Placement {
	as := s.assigner.Load()
	if as == nil {
		return lease.Placement{}
	}
	p := as.Place(agent)
	pat := s.affinity[agent]
	return lease.Placement{Owner: p.Owner, Eligible: pat == "" || !p.Matched || membership.Matches(pat, s.holder)}
}

// acquired is lease.Options.OnAcquire: consume the agent's messages and
// run its turns here. A lease taken back that never left (a lapse nobody
// used) runs on from what this process holds, without a restore.
func (s *spread) acquired(agent string, g lease.Gain) {
	w := s.w
	a, err := w.driver.Agent(agent)
	if err != nil {
		return // removed by a reload; its lease is being let go (reload.go)
	}
	a.SetOwner(s.holder)
	a.Acquired(g.Moved) // first: its state is restored (if moved) before it reads its log
	// The router wakes it for news from now on (never fails with the log;
	// in core NATS mode a failed subscribe is logged by the binding).
	_ = w.binding.Bind(context.Background(), agent)
	w.metrics.OwnershipChange(agent, string(lease.Acquired))
	if !g.Moved {
		// Taken back with the rest after a let-go: the lease manager says
		// how many in one line.
		s.log.Debug("agent owned here again", "agent", agent, "holder", s.holder)
		return
	}
	s.log.Info("agent owned here", "agent", agent, "holder", s.holder)
	if pat := s.affinity[agent]; pat != "" && !membership.Matches(pat, s.holder) {
		s.log.Warn("agent taken by a replica outside its replica_affinity: no live replica matches it; it moves back when one does",
			"agent", agent, "replica_affinity", pat, "holder", s.holder)
	}
}

// lost is lease.Options.OnLose. A lost or released lease cancels the
// running turn at once (another replica may own the agent already); a
// handed-over agent runs nothing (drain), so the router stops waking it
// first; its messages stay in the log for the next owner either way.
func (s *spread) lost(agent string, why lease.Reason) {
	w := s.w
	a, err := w.driver.Agent(agent)
	if err != nil {
		return // removed by a reload (reload.go)
	}
	if why == lease.HandedOver {
		w.binding.Unbind(agent)
		a.SetOwned(false)
	} else {
		a.SetOwned(false)
		w.binding.Unbind(agent)
	}
	a.SetOwner("")
	log := s.log.Info
	switch why {
	case lease.Lost:
		log = s.log.Warn
	case lease.Lapsed:
		// Let go with every other agent at once: the lease manager says
		// so, and how many, in one line.
		why, log = lease.Lost, s.log.Debug
	}
	w.metrics.OwnershipChange(agent, string(why))
	log("agent no longer owned here", "agent", agent, "reason", string(why), "holder", s.holder)
}

// drain is lease.Options.OnDrain: no new turn for the agent here; wait
// for the running one to finish.
func (s *spread) drain(ctx context.Context, agent string) error {
	a, err := s.w.driver.Agent(agent)
	if err != nil {
		return nil // removed by a reload: nothing runs
	}
	return a.Release(ctx)
}

// undrain is lease.Options.OnUndrain: the handover was called off after
// the drain; turns run here again, and the timer the scheduler left for
// the next owner while the gate said standby is armed here again.
func (s *spread) undrain(agent string) {
	a, err := s.w.driver.Agent(agent)
	if err != nil {
		return // removed by a reload
	}
	a.SetOwned(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.w.driver.Scheduler().Reload(ctx, agent); err != nil {
		s.log.Warn("could not reload the agent's timer after a called-off handover", "agent", agent, "error", err)
	}
}

// released is lease.Options.OnReleased: tell the replica the agent is
// placed on to take it now.
func (s *spread) released(agent, to string) {
	if m := s.members.Load(); m != nil {
		m.Released(agent, to)
	}
}

// owner is lease.Options.OnOwner: who holds the agent, for its status.
func (s *spread) owner(agent, holder string) {
	if a, err := s.w.driver.Agent(agent); err == nil {
		a.SetOwner(holder)
	}
}

// leave tells the others this replica is going: they drop it and place
// its agents among themselves; handovers start at once, each as soon as
// the agent's running turn has finished.
func (s *spread) leave() {
	if m := s.members.Load(); m != nil {
		m.Leave()
	}
}

// close leaves and unsubscribes.
func (s *spread) close() {
	if m := s.members.Load(); m != nil {
		m.Close()
	}
}

// Replicas is metrics.ReplicaSource: the live replicas this one sees (1
// before the membership starts).
func (s *spread) Replicas() int {
	m := s.members.Load()
	if m == nil {
		return 1
	}
	return len(m.Live())
}

// Members returns the other live replicas as this one sees them.
func (w *Worker) Members() []membership.Member {
	if m := w.spread.members.Load(); m != nil {
		return m.Members()
	}
	return nil
}

// replicas is api.Options.Replicas: this replica, with the agents it
// holds, then the others as their heartbeats describe them.
func (s *spread) replicas() []api.Replica {
	self := api.Replica{Name: s.holder, Self: true}
	if l := s.leases.Load(); l != nil {
		self.Agents = l.HeldAgents()
		if len(self.Agents) > 0 && !l.Sure() {
			self.Agents, self.Unconfirmed = nil, self.Agents
		}
	}
	m := s.members.Load()
	if m == nil {
		return []api.Replica{self}
	}
	self.Started = m.Started()
	out := []api.Replica{self}
	for _, x := range m.Members() {
		seen := x.Seen
		out = append(out, api.Replica{Name: x.Holder, Started: x.Started, LastSeen: &seen, Agents: x.Agents})
	}
	return out
}

// Leases returns the lease manager.
func (w *Worker) Leases() *lease.Manager { return w.leases }
