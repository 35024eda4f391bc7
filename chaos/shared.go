package main

import (
	"fmt"
	"strings"
	"time"
)

// The shared-kill scenario's subject and timing.
const (
	sharedKillSubject    = "chaos.shared.load"
	sharedKillEvery      = 40 * time.Millisecond
	sharedKillAlone      = 3 * time.Second  // the survivors alone, under load
	sharedKillAfter      = 3 * time.Second  // the load after the restart
	sharedKillSpreadIn   = 20 * time.Second // bounds the first spread
	sharedKillTakeoverIn = 10 * time.Second // bounds the takeover after the kill
)

// sharedKill: three replicas, six agents, two of which bind one subject
// (one as inbox, one as deferred); the replica owning the inbox one is
// killed with SIGKILL under load and restarted. Every message on the
// shared subject is owed to both agents, once each: a new owner reads on
// from the agent's own cursor on the subject, and the subject is purged
// only below both cursors, so neither agent's kill can cost the other.
func sharedKill(e *env) error {
	agents := numbered("a", 6)
	r := &sharedKillRun{e: e, holders: []string{"r1", "r2", "r3"}, agents: agents, wake: agents[0], later: agents[1]}
	r.story()
	if err := r.setUp(); err != nil {
		return err
	}
	stopLoad := r.load()
	defer stopLoad()
	if err := r.killAndRestart(); err != nil {
		return err
	}
	if err := sleep(e.ctx, sharedKillAfter); err != nil {
		return err
	}
	if err := stopLoad(); err != nil {
		return err
	}
	return r.check()
}

// sharedKillRun is the shared-kill scenario's state, phase to phase.
type sharedKillRun struct {
	e               *env
	holders, agents []string
	wake, later     string // the agents binding the subject as inbox and as deferred
	reps            map[string]*service
	all             []*service // reps in the order of holders
}

// story tells what the scenario does and promises.
func (r *sharedKillRun) story() {
	e, agents, wake, later := r.e, r.agents, r.wake, r.later
	e.story("Three replicas (lease ttl 3 s, heartbeat 1 s) shared one external nats-server and its KV store, with %d agents (%s–%s); %s binds %s as inbox and %s binds it as deferred (`subscribe:`), so every message there is owed to each of them, once.",
		len(agents), agents[0], agents[len(agents)-1], wake, sharedKillSubject, later)
	e.story("One message went every %s: every third to %s, the others round-robin to the agents' inboxes (which also wakes %s, whose share of the subject waits as deferred input).", human(sharedKillEvery), sharedKillSubject, later)
	e.story("Once the agents were spread, the replica owning %s was killed with SIGKILL; the others had to own every agent within %s; %s later it was started again. %s after that the load stopped, one more inbox message went to %s (its deferred share rides along with a turn), and every (agent, message) pair owed was accounted.", wake, human(sharedKillTakeoverIn), human(sharedKillAlone), human(sharedKillAfter), later)
}

// setUp starts the nats-server and the replicas, wake and later binding
// the shared subject.
func (r *sharedKillRun) setUp() error {
	e := r.e
	_, url, err := e.nats()
	if err != nil {
		return err
	}
	extra := map[string]string{
		r.wake:  fmt.Sprintf("    subscribe: [{subject: %q, mode: inbox}]\n", sharedKillSubject),
		r.later: fmt.Sprintf("    subscribe: [{subject: %q, mode: deferred}]\n", sharedKillSubject),
	}
	r.reps, r.all, err = e.replicas(r.holders, workerConf{natsURL: url, agents: r.agents, script: handledScript, unthrottled: true, heartbeat: time.Second, extra: extra, ackWait: 30 * time.Second})
	if err != nil {
		return err
	}
	return e.connect(url)
}

// load publishes in the background, every third message to the shared
// subject (owed to wake and later), the others round-robin to the agents'
// inboxes, until the returned function is called.
func (r *sharedKillRun) load() (stop func() error) {
	e, agents := r.e, r.agents
	e.owe = owed{}
	halt := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-halt:
				done <- nil
				return
			default:
			}
			m, to := message{agent: agents[i%len(agents)]}, []string{agents[i%len(agents)]}
			if i%3 == 0 {
				m, to = message{subject: sharedKillSubject}, []string{r.wake, r.later}
			}
			id, err := e.pub.publish(e.ctx, "m", m)
			if err != nil {
				done <- err
				return
			}
			e.oweTo(id, to)
			if err := sleep(e.ctx, sharedKillEvery); err != nil {
				done <- err
				return
			}
		}
	}()
	return e.stopper(halt, done)
}

// killAndRestart waits for the agents to be spread, kills the replica
// owning wake, waits for the survivors to own every agent, and restarts
// it after a while.
func (r *sharedKillRun) killAndRestart() error {
	e := r.e
	spread, _, err := e.awaitOwners(r.all, r.agents, sharedKillSpreadIn, "each replica to own 1–3 agents", spreadOver(r.holders, 1, 3))
	if err != nil {
		return err
	}
	if err := sleep(e.ctx, time.Second); err != nil {
		return err
	}
	var victim string
	for _, h := range r.holders {
		for _, a := range spread.of(h) {
			if a == r.wake {
				victim = h
			}
		}
	}
	survivors, rest := survivorsOf(r.holders, victim, r.reps)
	if err := r.reps[victim].kill(); err != nil {
		return err
	}
	killed := time.Now()
	e.cleared(killed, spread.of(victim), "")
	_, at, err := e.awaitOwners(rest, r.agents, sharedKillTakeoverIn, "every agent to be owned by "+strings.Join(survivors, " or "), func(o owners) bool { return o.ownedBy(survivors) })
	if err != nil {
		return fmt.Errorf("takeover after the kill of %s: %w", victim, err)
	}
	e.note("%s killed, owning %s: every agent owned by %s %s after the kill", victim, list(spread.of(victim)), strings.Join(survivors, " or "), secs(at.Sub(killed)))
	if err := sleep(e.ctx, sharedKillAlone); err != nil {
		return err
	}
	return e.start(r.reps[victim])
}

// check accounts every (agent, message) pair owed once the load stopped.
func (r *sharedKillRun) check() error {
	e := r.e
	// The last messages on the subject wait for later's next turn as
	// deferred input: one more inbox message brings it.
	id, err := e.pub.publish(e.ctx, "k", message{agent: r.later})
	if err != nil {
		return err
	}
	e.oweTo(id, []string{r.later})
	if err := e.drain(drainTimeout, r.agents); err != nil {
		return err
	}
	n := 0
	for _, to := range e.owe {
		if len(to) == 2 {
			n++
		}
	}
	e.note("%d message(s) on %s, each owed to %s and %s", n, sharedKillSubject, r.wake, r.later)
	return nil
}

// oweTo notes that the message id is owed to agents.
func (e *env) oweTo(id string, agents []string) {
	e.oweMu.Lock()
	e.owe[id] = agents
	e.oweMu.Unlock()
}
