package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agent-worker/agent-worker/internal/textclip"
)

// The replica-killed scenario's timing.
const (
	// replicaLoadEvery is how often a message goes out, round-robin to
	// the agents.
	replicaLoadEvery = 40 * time.Millisecond
	// replicaAckWait is far above the lease ttl: an agent's input has no
	// ack deadline any more, so nothing here may wait for it.
	replicaAckWait = 30 * time.Second
	// joinBound is how long a message may wait across a rejoin: a
	// handover leaves none behind.
	joinBound = 5 * time.Second
	// spreadDeadline bounds the wait for the agents to be spread, at the
	// start and after the rejoin.
	spreadDeadline = 20 * time.Second
	// takeoverDeadline bounds the takeover after the kill: the lease ttl
	// (3 s) and a third of it by design, the rest room for a loaded
	// 2-core machine.
	takeoverDeadline = 10 * time.Second
	survivorsAlone   = 2 * time.Second // the survivors alone, under load
	loadAfterRejoin  = 3 * time.Second // the load after the rejoin
)

// replicaKilled: three replicas spread twelve agents among themselves;
// the one owning most is killed with SIGKILL under load and the two
// others must take its agents over within the lease's ttl; restarted, it
// must get its share back by graceful handovers.
func replicaKilled(e *env) error {
	r := &replicaKill{e: e, holders: []string{"r1", "r2", "r3"}, agents: numbered("a", 12)}
	share := len(r.agents) / len(r.holders)
	r.lo, r.hi = share-1, share+1
	r.story()
	stopLoad, err := r.setUp()
	if err != nil {
		return err
	}
	defer stopLoad() // on an early return
	first, err := r.spread()
	if err != nil {
		return err
	}
	if err := r.kill(first); err != nil {
		return err
	}
	if err := r.rejoin(); err != nil {
		return err
	}
	loadEnded := time.Now()
	if err := stopLoad(); err != nil {
		return err
	}
	return r.check(loadEnded)
}

// replicaKill is the replica-killed scenario's state, phase to phase.
type replicaKill struct {
	e               *env
	holders, agents []string
	lo, hi          int // how many agents each replica owns when spread
	reps            map[string]*service
	all             []*service // reps in the order of holders
	allStarted      time.Time  // the last replica ready
	loadBegan       time.Time
	victim          string   // the replica killed
	moved           []string // the agents it owned
	killed          time.Time
	restarted       time.Time // the victim's restart
}

// story tells what the scenario does and promises.
func (r *replicaKill) story() {
	e, agents, lo, hi := r.e, r.agents, r.lo, r.hi
	e.story("Three replicas (lease holders r1, r2 and r3; lease ttl 3 s, heartbeat 1 s, ack_wait %s) shared one external nats-server and its KV store, with %d agents (%s–%s); one message went every %s round-robin to the %d from the start until %s after the rejoin below.",
		human(replicaAckWait), len(agents), agents[0], agents[len(agents)-1], human(replicaLoadEvery), len(agents), human(loadAfterRejoin))
	e.story("Every %s the harness asked the API who owned each agent (the `owner` of GET /v1/agents/{name}; every replica answers with the owner's view), of each running replica in turn, until each replica owned %d–%d agents (within %s, else the scenario fails).", human(ownerPollEvery), lo, hi, human(spreadDeadline))
	e.story("A second later the replica owning most agents was killed with SIGKILL, and the two others had to own all %d within %s (else the scenario fails; the lease ttl plus a third of it is the design's bound, the rest room for a loaded machine).", len(agents), human(takeoverDeadline))
	e.story("The messages the killed replica had read for its agents but not handled stay in the input log below no cursor: the new owners read them from the agents' cursors as soon as they hold the leases, and must handle them within %s of the kill (the takeover's bound), never waiting for ack_wait.", human(takeoverDeadline))
	e.story("%s after they did, it was started again with the same holder name and had to own %d–%d agents again within %s, handed over gracefully: the old owner lets its running turn complete, then releases the lease, so no turn should fail and no message wait %s.", human(survivorsAlone), lo, hi, human(spreadDeadline), human(joinBound))
	e.story("Then each replica's metrics were checked against the owners the API showed (agent_worker_agent_owned, agent_worker_replicas), and the load stopped.")
	e.story("Recovery: from the kill to the first completed turn of an agent that moved.")
}

// setUp starts the nats-server and the three replicas, and the load; it
// returns the function that stops the load.
func (r *replicaKill) setUp() (stopLoad func() error, err error) {
	e := r.e
	_, url, err := e.nats()
	if err != nil {
		return nil, err
	}
	r.reps, r.all, err = e.replicas(r.holders, workerConf{natsURL: url, agents: r.agents, script: handledScript, unthrottled: true, heartbeat: time.Second, ackWait: replicaAckWait})
	if err != nil {
		return nil, err
	}
	r.allStarted = time.Now()
	if err := e.connect(url); err != nil {
		return nil, err
	}
	r.loadBegan = time.Now()
	return e.loadUntil(replicaLoadEvery, r.agents), nil
}

// spreadWhat is what the waits for the agents to be spread say.
func (r *replicaKill) spreadWhat() string {
	return fmt.Sprintf("each replica to own %d–%d agents", r.lo, r.hi)
}

// spread waits for the agents to be spread over the replicas and returns
// who owns them then.
func (r *replicaKill) spread() (owners, error) {
	first, at, err := r.e.awaitOwners(r.all, r.agents, spreadDeadline, r.spreadWhat(), spreadOver(r.holders, r.lo, r.hi))
	if err != nil {
		return nil, err
	}
	r.e.note("spread %s, %s after the last replica was ready", first.spread(r.holders), secs(at.Sub(r.allStarted)))
	return first, nil
}

// kill kills the replica owning most agents in first, waits for the
// survivors to own every agent and lets them run alone for a while.
func (r *replicaKill) kill(first owners) error {
	e := r.e
	r.victim = first.busiest(r.holders)
	r.moved = first.of(r.victim)
	survivors, rest := survivorsOf(r.holders, r.victim, r.reps)
	if err := sleep(e.ctx, time.Second); err != nil { // well into the load
		return err
	}
	if err := r.reps[r.victim].kill(); err != nil {
		return err
	}
	r.killed = time.Now()
	e.cleared(r.killed, r.moved, "")
	taken, at, err := e.awaitOwners(rest, r.agents, takeoverDeadline, "every agent to be owned by "+strings.Join(survivors, " or "), func(o owners) bool { return o.ownedBy(survivors) })
	if err != nil {
		return fmt.Errorf("takeover after the kill of %s: %w", r.victim, err)
	}
	took := at.Sub(r.killed)
	if err := e.tail.Poll(); err != nil {
		return err
	}
	even := len(r.agents) / len(survivors)
	e.note("%s killed, owning %s: every agent owned by %s %s after the kill (API%s), spread then %s%s",
		r.victim, list(r.moved), strings.Join(survivors, " or "), secs(took), takenOverLogged(e.led, r.killed, r.moved), taken.spread(survivors),
		when(!spreadOver(survivors, even-1, even+1)(taken), fmt.Sprintf(", outside the expected %d–%d", even-1, even+1)))
	return sleep(e.ctx, survivorsAlone)
}

// survivorsOf returns the holders other than victim, by name and as
// their services.
func survivorsOf(holders []string, victim string, reps map[string]*service) ([]string, []*service) {
	var survivors []string
	var rest []*service
	for _, name := range holders {
		if name != victim {
			survivors = append(survivors, name)
			rest = append(rest, reps[name])
		}
	}
	return survivors, rest
}

// rejoin restarts the victim, waits for the agents to be spread again,
// lets the load run on, and checks the metrics against the owners.
func (r *replicaKill) rejoin() error {
	e := r.e
	if err := e.start(r.reps[r.victim]); err != nil {
		return err
	}
	r.restarted = r.reps[r.victim].starts[len(r.reps[r.victim].starts)-1]
	ready := time.Now()
	again, at, err := e.awaitOwners(r.all, r.agents, spreadDeadline, r.spreadWhat()+" again", spreadOver(r.holders, r.lo, r.hi))
	if err != nil {
		return fmt.Errorf("rejoin of %s: %w", r.victim, err)
	}
	e.note("%s restarted: spread %s again %s after the restart (%s after it was ready)", r.victim, again.spread(r.holders), secs(at.Sub(r.restarted)), secs(at.Sub(ready)))
	if err := sleep(e.ctx, loadAfterRejoin); err != nil {
		return err
	}
	diffs, err := e.checkMetrics(r.all, again, r.agents)
	if err != nil {
		return err
	}
	if len(diffs) > 0 {
		return fmt.Errorf("metrics disagree with the API: %s", strings.Join(diffs, "; "))
	}
	e.note("metrics agree with the API: agent_worker_agent_owned 1 on the owner only, agent_worker_replicas %d on each", len(r.all))
	return nil
}

// check drains the last messages once the load ended (at loadEnded) and
// checks what the kill and the rejoin cost.
func (r *replicaKill) check(loadEnded time.Time) error {
	e := r.e
	if err := e.drain(drainTimeout, r.agents); err != nil {
		return err
	}
	joinErr := e.noteJoin(r.victim, r.restarted, loadEnded, joinBound)
	heldErr := e.noteHeld(r.moved, r.loadBegan, r.killed, takeoverDeadline)
	if slow, n := e.slowest(r.loadBegan, r.restarted); n > 0 {
		e.note("before the restart the slowest message (%s to %s%s) was handled %s after its publish", slow.id, slow.agent, when(slices.Contains(r.moved, slow.agent), ", an agent that moved"), secs(slow.took))
	}
	for _, c := range e.led.LeaseChangesSince(time.Time{}, leaseLost) {
		e.note("%s let %s go without a handover at %s: %q", c.Source, c.Agent, c.Time.Format("15:04:05.000"), c.Msg)
	}
	return errors.Join(joinErr, heldErr)
}

// noteHeld notes how soon the messages of agents that moved, published
// from began until the kill and handled after it — those the killed
// replica held or had not reached — were handled after the kill, and
// returns an error when one took longer than bound.
func (e *env) noteHeld(moved []string, began, killed time.Time, bound time.Duration) error {
	var worst latency
	n := 0
	for _, id := range e.published() {
		s, ok := e.pub.sentAt(id)
		if !ok || !slices.Contains(moved, s.agent) || s.at.Before(began) || !s.at.Before(killed) {
			continue
		}
		at, ok := e.led.HandledAt(id)
		if !ok || !at.After(killed) {
			continue
		}
		n++
		if d := at.Sub(killed); d > worst.took {
			worst = latency{id: id, agent: s.agent, took: d}
		}
	}
	if n == 0 {
		e.note("no message of a moved agent was left for its new owner")
		return nil
	}
	e.note("%d message(s) the killed replica's agents had not handled were handled by their new owners at most %s after the kill (%s to %s; lease ttl 3 s, ack_wait 30 s)", n, secs(worst.took), worst.id, worst.agent)
	if worst.took > bound {
		return fmt.Errorf("message %s of %s, left by the killed replica, was handled %s after the kill: more than %s", worst.id, worst.agent, secs(worst.took), human(bound))
	}
	return nil
}

// replicas starts a worker per holder with c, in order, and returns them
// by name and in order.
func (e *env) replicas(holders []string, c workerConf) (map[string]*service, []*service, error) {
	reps := map[string]*service{}
	var all []*service
	for _, name := range holders {
		w, err := e.worker(name, c)
		if err != nil {
			return nil, nil, err
		}
		if err := e.start(w); err != nil {
			return nil, nil, err
		}
		reps[name] = w
		all = append(all, w)
	}
	return reps, all, nil
}

// noteJoin notes how agents went back to the restarted replica victim:
// by graceful handovers (how many let a running turn finish first, and
// the longest), with no turn failed since the restart (a handover never
// cancels one) and no message kept waiting (the slowest of those
// published from the restart to end, against bound). It returns an
// error when a turn failed since the restart or a message waited bound:
// a join must cost neither.
func (e *env) noteJoin(victim string, restarted, end time.Time, bound time.Duration) error {
	began := map[string]time.Time{} // replica/agent → handing over
	var to, other []string
	var longest time.Duration
	waited := 0
	for _, c := range e.led.LeaseChangesSince(restarted, "") {
		key := c.Source + "/" + c.Agent
		switch {
		case c.Kind == leaseHandingOver:
			began[key] = c.Time
		case c.Kind == leaseHandedOver && c.Peer != victim:
			other = append(other, fmt.Sprintf("%s %s→%s", c.Agent, c.Source, c.Peer))
		case c.Kind == leaseHandedOver:
			to = append(to, c.Agent)
			if t, ok := began[key]; ok {
				longest = max(longest, c.Time.Sub(t))
				if e.led.CompletedOn(c.Agent, c.Source, t, c.Time) > 0 {
					waited++
				}
			}
		}
	}
	slices.Sort(to)
	e.note("join: %d agent(s) handed over to %s (%s), %d of them once their running turn had completed, the longest in %v%s",
		len(to), victim, list(to), waited, longest.Round(time.Millisecond), when(len(other) > 0, "; also handed over: "+list(other)))
	failed := e.led.FailuresSince(restarted)
	var parts []string
	for _, f := range failed {
		parts = append(parts, fmt.Sprintf("%s on %s %s (%q)", f.Agent, f.Source, f.Outcome, textclip.Bytes(f.Error, 120, "…")))
	}
	e.note("turns failed or interrupted since the restart: %d%s", len(failed), when(len(failed) > 0, ": "+strings.Join(parts, ", ")))
	slow, n := e.slowest(restarted, end)
	if n > 0 {
		e.note("the slowest of the %d messages published after the restart (%s to %s) was handled %s after its publish", n, slow.id, slow.agent, secs(slow.took))
	}
	switch {
	case len(failed) > 0:
		return fmt.Errorf("%d turn(s) failed or were interrupted after %s rejoined: a handover must let turns finish", len(failed), victim)
	case n > 0 && slow.took >= bound:
		return fmt.Errorf("message %s waited %s after %s rejoined: a handover must not leave messages waiting (%s)", slow.id, secs(slow.took), victim, human(bound))
	}
	return nil
}

// takenOverLogged says when, per the survivors' logs, the last of agents
// was taken over after t: `; the last of 4 "lease taken over" logged
// 3.1 s after it`, or "" when the logs show none.
func takenOverLogged(l *Ledger, t time.Time, agents []string) string {
	var last time.Time
	n := 0
	for _, c := range l.LeaseChangesSince(t, leaseTakenOver) {
		if slices.Contains(agents, c.Agent) {
			last = later(last, c.Time)
			n++
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; the last of %d \"lease taken over\" logged %s after it", n, secs(last.Sub(t)))
}
