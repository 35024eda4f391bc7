package worker

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/lease"
	"github.com/agent-worker/agent-worker/store"
)

// startLeases takes the agents' leases: this replica runs, consumes and
// fires timers for the agents it holds. The replicas that share the NATS
// know each other (membership heartbeats) and divide the agents evenly;
// this one takes over the agents of a replica that dies, and hands agents
// over gracefully to one that joins (membership.go).
func (w *Worker) startLeases(st *starting) error {
	ctx, cfg, o := st.ctx, st.cfg, st.o
	w.spread.init(w, cfg, o.Log)
	s := &w.spread
	names := make([]string, 0, len(cfg.Agents))
	for _, a := range cfg.Agents {
		names = append(names, a.Name)
	}
	var err error
	w.leases, err = lease.New(names, lease.Options{Store: w.store, Renewal: w.renewal, Clock: o.Clock, Log: o.Log, Holder: s.holder, TTL: cfg.Lease.TTL.D(),
		Assign: s.place, OnAcquire: s.acquired, OnLose: s.lost, OnDrain: s.drain, OnUndrain: s.undrain,
		OnReleased: s.released, OnOwner: s.owner,
		OnRenewed: w.metrics.LeaseRenewed, OnLetGo: w.metrics.LeaseLetGo,
		// Renewed on a connection of its own, but only while the one the
		// agents' work goes through is up.
		Live: w.conn.Ready,
	})
	if err != nil {
		return err
	}
	w.owner.set(w.leases) // before Start: an agent acquired is owned for its writes at once
	if err = s.startMembership(ctx, cfg, names, w.leases); err != nil {
		return fmt.Errorf("membership: %w", err)
	}
	w.leases.Start(ctx)
	o.Log.Info("leases", "holder", s.holder, "ttl", cfg.Lease.TTL.D(), "heartbeat", cfg.Lease.Heartbeat.D(),
		"replicas", s.Replicas(), "owned", len(w.leases.HeldAgents()))
	return nil
}

// releaseLeases lets the leases go after a failed Start; after Stop's
// drain, which released them and left the membership, there are none.
func (w *Worker) releaseLeases(context.Context) {
	if w.leases == nil {
		return
	}
	w.spread.leave()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	w.leases.Stop(ctx)
	cancel()
	w.spread.close()
}

// holderName is this replica's name among the replicas (lease.holder;
// default the host name, then the pid): the owner named in agent views and
// control replies, and the lease records' holder.
func holderName(cfg *config.Config) string {
	holder := cfg.Lease.Holder
	if holder == "" {
		holder, _ = os.Hostname()
	}
	if holder == "" {
		holder = fmt.Sprintf("agent-worker-%d", os.Getpid())
	}
	return holder
}

// leaseOwner says which agents this replica owns — those whose lease it
// holds (lease.Manager.Held) — for the guard, the scheduler, the driver
// (through the scheduler) and control. Before the lease manager exists,
// and after it stopped, it owns nothing, so nothing is written. It takes
// only the lease manager's lock, never an agent's, so the guard may ask
// it while the driver holds the agent's.
type leaseOwner struct {
	m atomic.Pointer[lease.Manager]
}

func (o *leaseOwner) set(m *lease.Manager) { o.m.Store(m) }

// Owns implements guard.Owner, scheduler.Owner and control.Owner: the
// lease is held here, surely (its fence is good on this process's clock).
func (o *leaseOwner) Owns(agent string) bool {
	_, ok := o.Fence(agent)
	return ok
}

// Fence implements guard.Owner and scheduler.Owner: the fence the agent's
// writes are made under (lease.Manager.Fence).
func (o *leaseOwner) Fence(agent string) (store.Fence, bool) {
	m := o.m.Load()
	if m == nil {
		return store.Fence{}, false
	}
	return m.Fence(agent)
}

// Doubt implements control.Doubter: a lease held here whose renewal has
// not been confirmed in time may be another replica's by now.
func (o *leaseOwner) Doubt(agent string) string {
	if m := o.m.Load(); m != nil {
		return m.Doubt(agent)
	}
	return ""
}
