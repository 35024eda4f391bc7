package main

import (
	"fmt"
	"strings"
	"time"
)

// sharedKill: three replicas, six agents, two of which bind one subject
// (one as inbox, one as deferred); the replica owning the inbox one is
// killed with SIGKILL under load and restarted. Every message on the
// shared subject is owed to both agents, once each: a new owner reads on
// from the agent's own cursor on the subject, and the subject is purged
// only below both cursors, so neither agent's kill can cost the other.
func sharedKill(e *env) error {
	const (
		interval   = 40 * time.Millisecond
		shared     = "chaos.shared.load"
		alone      = 3 * time.Second
		after      = 3 * time.Second
		spreadIn   = 20 * time.Second
		takeoverIn = 10 * time.Second
	)
	holders := []string{"r1", "r2", "r3"}
	agents := numbered("a", 6)
	wake, later := agents[0], agents[1]
	e.story("Three replicas (lease ttl 3 s, heartbeat 1 s) shared one external nats-server and its KV store, with %d agents (%s–%s); %s binds %s as inbox and %s binds it as deferred (`subscribe:`), so every message there is owed to each of them, once.",
		len(agents), agents[0], agents[len(agents)-1], wake, shared, later)
	e.story("One message went every %s: every third to %s, the others round-robin to the agents' inboxes (which also wakes %s, whose share of the subject waits as deferred input).", human(interval), shared, later)
	e.story("Once the agents were spread, the replica owning %s was killed with SIGKILL; the others had to own every agent within %s; %s later it was started again. %s after that the load stopped, one more inbox message went to %s (its deferred share rides along with a turn), and every (agent, message) pair owed was accounted.", wake, human(takeoverIn), human(alone), human(after), later)
	_, url, err := e.nats()
	if err != nil {
		return err
	}
	extra := map[string]string{
		wake:  fmt.Sprintf("    subscribe: [{subject: %q, mode: inbox}]\n", shared),
		later: fmt.Sprintf("    subscribe: [{subject: %q, mode: deferred}]\n", shared),
	}
	reps, all, err := e.replicas(holders, workerConf{natsURL: url, agents: agents, script: handledScript, unthrottled: true, heartbeat: time.Second, extra: extra, ackWait: 30 * time.Second})
	if err != nil {
		return err
	}
	if err := e.connect(url); err != nil {
		return err
	}
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
				m, to = message{subject: shared}, []string{wake, later}
			}
			id, err := e.pub.publish(e.ctx, "m", m)
			if err != nil {
				done <- err
				return
			}
			e.oweTo(id, to)
			if err := sleep(e.ctx, interval); err != nil {
				done <- err
				return
			}
		}
	}()
	stopLoad := e.stopper(halt, done)
	defer stopLoad()

	spread, _, err := e.awaitOwners(all, agents, spreadIn, "each replica to own 1–3 agents", spreadOver(holders, 1, 3))
	if err != nil {
		return err
	}
	if err := sleep(e.ctx, time.Second); err != nil {
		return err
	}
	var victim string
	for _, h := range holders {
		for _, a := range spread.of(h) {
			if a == wake {
				victim = h
			}
		}
	}
	var survivors []string
	var rest []*service
	for _, h := range holders {
		if h != victim {
			survivors, rest = append(survivors, h), append(rest, reps[h])
		}
	}
	if err := reps[victim].kill(); err != nil {
		return err
	}
	killed := time.Now()
	e.cleared(killed, spread.of(victim), "")
	if _, at, err := e.awaitOwners(rest, agents, takeoverIn, "every agent to be owned by "+strings.Join(survivors, " or "), func(o owners) bool { return o.ownedBy(survivors) }); err != nil {
		return fmt.Errorf("takeover after the kill of %s: %w", victim, err)
	} else {
		e.note("%s killed, owning %s: every agent owned by %s %s after the kill", victim, list(spread.of(victim)), strings.Join(survivors, " or "), secs(at.Sub(killed)))
	}
	if err := sleep(e.ctx, alone); err != nil {
		return err
	}
	if err := e.start(reps[victim]); err != nil {
		return err
	}
	if err := sleep(e.ctx, after); err != nil {
		return err
	}
	if err := stopLoad(); err != nil {
		return err
	}
	// The last messages on the subject wait for later's next turn as
	// deferred input: one more inbox message brings it.
	id, err := e.pub.publish(e.ctx, "k", message{agent: later})
	if err != nil {
		return err
	}
	e.oweTo(id, []string{later})
	if err := e.drain(drainTimeout, agents); err != nil {
		return err
	}
	n := 0
	for _, to := range e.owe {
		if len(to) == 2 {
			n++
		}
	}
	e.note("%d message(s) on %s, each owed to %s and %s", n, shared, wake, later)
	return nil
}

// oweTo notes that the message id is owed to agents.
func (e *env) oweTo(id string, agents []string) {
	e.oweMu.Lock()
	e.owe[id] = agents
	e.oweMu.Unlock()
}
