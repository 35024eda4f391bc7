package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// scenario is one fault and its load.
type scenario struct {
	name, title string
	run         func(e *env) error
}

// scenarios run in this order; -run selects them by name.
var scenarios = []scenario{
	{"kill9", "kill -9 mid-turn, 5 times", kill9},
	{"nats-restart", "NATS server kill -9 and restart under load", natsRestart},
	{"redis-down", "Redis down 10 s under load", redisDown},
	{"backlog", "backlog of 1000 deferred + 20 inbox while down", backlog},
	{"large-batch", "25 messages of 50 KB released from a pause", largeBatch},
	{"replica-killed", "3 replicas, 12 agents: the busiest killed -9, then restarted", replicaKilled},
	{"self-reschedule", "a model that reschedules itself at once", selfReschedule},
	{"durable-turn", "kill -9 between a turn's side effect and its end, 5 times", durableTurn},
	{"shared-kill", "2 agents binding one subject, and a replica killed -9", sharedKill},
}

// drainTimeout bounds the wait for the last messages after a scenario's
// load, once the fault is over.
const drainTimeout = 45 * time.Second

var one = []string{"a1"}

// kill9: one worker with its embedded NATS, killed with SIGKILL five
// times under a steady load, restarted each time on the same data.
func kill9(e *env) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	w, err := e.worker("r1", workerConf{natsListen: addr, agents: one, script: handledScript, unthrottled: true})
	if err != nil {
		return err
	}
	if err := e.start(w); err != nil {
		return err
	}
	if err := e.connect("nats://" + addr); err != nil {
		return err
	}
	const n, kills = 250, 5
	e.story("One worker (embedded NATS, JetStream KV store, one agent whose turns take 200 ms) received %d messages published steadily, one every 60 ms.", n)
	e.story("It was killed with SIGKILL %d times, 1–3 s apart, each time as soon as its API showed a turn running (or after 1 s), and restarted at once on the same data directory; publishing stalled while the embedded server was down and went on with the same ids.", kills)
	e.story("Recovery: from each restart to the first completed turn after it.")
	done := e.pub.steady(e.ctx, n, 60*time.Millisecond, one)
	midTurn := 0
	for range kills {
		if err := sleep(e.ctx, time.Second+rand.N(2*time.Second)); err != nil {
			return err
		}
		// Catch a turn running, so the kill lands mid-turn; kill anyway
		// after a second.
		running := poll(e.ctx, time.Second, 10*time.Millisecond, "a turn to run", func() (bool, error) {
			st, err := w.status(e.ctx, "a1")
			return err == nil && st.State == "running", nil
		}) == nil
		if running {
			midTurn++
		}
		if err := w.kill(); err != nil {
			return err
		}
		if err := e.start(w); err != nil {
			return err
		}
		e.cleared(w.starts[len(w.starts)-1], one, "")
	}
	e.note("%d of %d kills landed while the API showed a turn running", midTurn, kills)
	if err := e.wait(done); err != nil {
		return err
	}
	return e.drain(drainTimeout, one)
}

// natsRestart: an external nats-server killed with SIGKILL and restarted
// on the same port and store directory under load.
func natsRestart(e *env) error {
	ns, url, err := e.nats()
	if err != nil {
		return err
	}
	w, err := e.worker("r1", workerConf{natsURL: url, agents: one, script: handledScript, unthrottled: true})
	if err != nil {
		return err
	}
	if err := e.start(w); err != nil {
		return err
	}
	if err := e.connect(url); err != nil {
		return err
	}
	const n = 200
	e.story("One worker on an external nats-server (JetStream KV store on it) received %d messages, one every 50 ms.", n)
	e.story("3 s into the load the nats-server was killed with SIGKILL and restarted at once on the same port and store directory; the worker kept running.")
	e.story("Recovery: from the server's restart to the first completed turn after it.")
	done := e.pub.steady(e.ctx, n, 50*time.Millisecond, one)
	if err := sleep(e.ctx, 3*time.Second); err != nil {
		return err
	}
	if err := ns.kill(); err != nil {
		return err
	}
	if err := e.start(ns); err != nil {
		return err
	}
	e.cleared(ns.starts[1], one, "")
	if err := e.wait(done); err != nil {
		return err
	}
	return e.drain(drainTimeout, one)
}

// redisDown: the Redis store stopped for 10 s under load.
func redisDown(e *env) error {
	_, url, err := e.nats()
	if err != nil {
		return err
	}
	rs, rurl, err := e.redis()
	if err != nil {
		return err
	}
	w, err := e.worker("r1", workerConf{natsURL: url, storeURL: rurl, agents: one, script: handledScript, unthrottled: true})
	if err != nil {
		return err
	}
	if err := e.start(w); err != nil {
		return err
	}
	if err := e.connect(url); err != nil {
		return err
	}
	const n = 250
	e.story("One worker on an external nats-server with its state in Redis (append-only file, fsync always) received %d messages, one every 80 ms.", n)
	e.story("3 s into the load redis-server was stopped with SIGTERM, left down for 10 s, and started again on the same directory.")
	e.story("Recovery: from Redis's restart to the first completed turn after it.")
	done := e.pub.steady(e.ctx, n, 80*time.Millisecond, one)
	if err := sleep(e.ctx, 3*time.Second); err != nil {
		return err
	}
	if err := rs.stop(15 * time.Second); err != nil {
		return err
	}
	if err := sleep(e.ctx, 10*time.Second); err != nil { // the outage
		return err
	}
	if err := e.start(rs); err != nil {
		return err
	}
	e.cleared(rs.starts[1], one, "")
	if err := e.wait(done); err != nil {
		return err
	}
	return e.drain(drainTimeout, one)
}

// backlog: a stopped worker's agent gets 1000 deferred and 20 inbox
// messages; after its start the inbox ones must be handled promptly and
// the deferred ones ride along with the turns that inbox messages (one a
// second) keep causing.
func backlog(e *env) error {
	const deferred, inbox = 1000, 20
	e.story("A worker on an external nats-server was started once (to create its stream and consumer) and stopped with SIGTERM.")
	e.story("While it was down %d deferred and then %d inbox messages were published to its agent; then it was started again.", deferred, inbox)
	e.story("From then on one more inbox message was published every second until every message was handled (or 90 s passed), so that deferred messages had turns to ride along with.")
	e.story("Recovery: from the start to the first completed turn.")
	_, url, err := e.nats()
	if err != nil {
		return err
	}
	w, err := e.worker("r1", workerConf{natsURL: url, agents: one, script: handledScript, unthrottled: true})
	if err != nil {
		return err
	}
	if err := e.start(w); err != nil { // creates the stream and the consumer
		return err
	}
	if err := w.stop(15 * time.Second); err != nil {
		return err
	}
	if err := e.connect(url); err != nil {
		return err
	}
	for range deferred {
		if _, err := e.pub.publish(e.ctx, "d", message{agent: "a1", deferred: true}); err != nil {
			return err
		}
	}
	var first []string
	for range inbox {
		id, err := e.pub.publish(e.ctx, "i", message{agent: "a1"})
		if err != nil {
			return err
		}
		first = append(first, id)
	}
	if err := e.start(w); err != nil {
		return err
	}
	started := w.starts[1]
	e.cleared(started, one, "")

	deadline := started.Add(90 * time.Second)
	var lastKeep time.Time
	inboxDone := time.Duration(-1)
	for {
		if err := e.tail.Poll(); err != nil {
			return err
		}
		if inboxDone < 0 {
			if at, ok := e.led.HandledAll(first); ok {
				inboxDone = at.Sub(started)
			}
		}
		if e.led.Unaccounted(e.published()) == 0 || time.Now().After(deadline) {
			break
		}
		if time.Since(lastKeep) >= time.Second {
			if _, err := e.pub.publish(e.ctx, "k", message{agent: "a1"}); err != nil {
				return err
			}
			lastKeep = time.Now()
		}
		if err := sleep(e.ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	if inboxDone >= 0 {
		e.note("the %d first inbox messages were all handled %s after the start", inbox, secs(inboxDone))
	} else {
		e.note("the %d first inbox messages were NOT all handled within 90 s of the start", inbox)
	}
	e.note("%d keep-alive inbox message(s) published", len(e.published())-deferred-inbox)
	return e.drain(drainTimeout/3, one)
}

// largeBatch: 25 bodies of about 50 KB queued while the agent is paused,
// then released in one resume.
func largeBatch(e *env) error {
	const n, pad = 25, 50_000
	e.story("One worker (embedded NATS, max_message_bytes 65536, the default) had its agent paused over the API; %d messages with bodies of about %d KB each were published to it and the harness waited until the API showed them queued.", n, (pad+100)/1000)
	e.story("Then the agent was resumed with about %.2f MB of messages queued: more than one turn takes (turn.max_input_bytes, 256 KiB), so the turns that follow take them in order, and more than one history record could hold before the history clipped message bodies.", float64(n*pad)/1e6)
	e.story("Recovery: from the resume to the first completed turn.")
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	w, err := e.worker("r1", workerConf{natsListen: addr, agents: one, script: handledScript, unthrottled: true})
	if err != nil {
		return err
	}
	if err := e.start(w); err != nil {
		return err
	}
	if err := e.connect("nats://" + addr); err != nil {
		return err
	}
	if err := w.verb(e.ctx, "a1", "pause"); err != nil {
		return err
	}
	for range n {
		if _, err := e.pub.publish(e.ctx, "m", message{agent: "a1", pad: pad}); err != nil {
			return err
		}
	}
	queued := 0
	if err := poll(e.ctx, 15*time.Second, 100*time.Millisecond, "the messages to reach the paused agent", func() (bool, error) {
		st, err := w.status(e.ctx, "a1")
		queued = st.InboxPending
		return err == nil && st.InboxPending >= n, nil
	}); err != nil && e.ctx.Err() == nil {
		e.note("only %d of %d messages were queued in the paused agent after 15 s", queued, n)
	} else {
		e.note("%d messages queued in the paused agent before the resume", queued)
	}
	if err := w.verb(e.ctx, "a1", "resume"); err != nil {
		return err
	}
	e.cleared(time.Now(), one, "")
	return e.drain(drainTimeout, one)
}

// replicaKilled: three replicas spread twelve agents among themselves;
// the one owning most is killed with SIGKILL under load and the two
// others must take its agents over within the lease's ttl; restarted, it
// must get its share back by graceful handovers.
func replicaKilled(e *env) error {
	const (
		interval = 40 * time.Millisecond
		// ackWait is far above the lease ttl: an agent's input has no ack
		// deadline any more, so nothing here may wait for it.
		ackWait = 30 * time.Second
		// joinBound is how long a message may wait across a rejoin: a
		// handover leaves none behind.
		joinBound = 5 * time.Second
		// spreadDeadline bounds the wait for the agents to be spread, at
		// the start and after the rejoin.
		spreadDeadline = 20 * time.Second
		// takeoverDeadline bounds the takeover after the kill: the lease
		// ttl (3 s) and a third of it by design, the rest room for a
		// loaded 2-core machine.
		takeoverDeadline = 10 * time.Second
		alone            = 2 * time.Second // the survivors alone, under load
		after            = 3 * time.Second // the load after the rejoin
	)
	holders := []string{"r1", "r2", "r3"}
	agents := numbered("a", 12)
	share := len(agents) / len(holders)
	lo, hi := share-1, share+1
	e.story("Three replicas (lease holders r1, r2 and r3; lease ttl 3 s, heartbeat 1 s, ack_wait %s) shared one external nats-server and its KV store, with %d agents (%s–%s); one message went every %s round-robin to the %d from the start until %s after the rejoin below.",
		human(ackWait), len(agents), agents[0], agents[len(agents)-1], human(interval), len(agents), human(after))
	e.story("Every %s the harness asked the API who owned each agent (the `owner` of GET /v1/agents/{name}; every replica answers with the owner's view), of each running replica in turn, until each replica owned %d–%d agents (within %s, else the scenario fails).", human(ownerPollEvery), lo, hi, human(spreadDeadline))
	e.story("A second later the replica owning most agents was killed with SIGKILL, and the two others had to own all %d within %s (else the scenario fails; the lease ttl plus a third of it is the design's bound, the rest room for a loaded machine).", len(agents), human(takeoverDeadline))
	e.story("The messages the killed replica had read for its agents but not handled stay in the input log below no cursor: the new owners read them from the agents' cursors as soon as they hold the leases, and must handle them within %s of the kill (the takeover's bound), never waiting for ack_wait.", human(takeoverDeadline))
	e.story("%s after they did, it was started again with the same holder name and had to own %d–%d agents again within %s, handed over gracefully: the old owner lets its running turn complete, then releases the lease, so no turn should fail and no message wait %s.", human(alone), lo, hi, human(spreadDeadline), human(joinBound))
	e.story("Then each replica's metrics were checked against the owners the API showed (agent_worker_agent_owned, agent_worker_replicas), and the load stopped.")
	e.story("Recovery: from the kill to the first completed turn of an agent that moved.")
	_, url, err := e.nats()
	if err != nil {
		return err
	}
	reps, all, err := e.replicas(holders, workerConf{natsURL: url, agents: agents, script: handledScript, unthrottled: true, heartbeat: time.Second, ackWait: ackWait})
	if err != nil {
		return err
	}
	allStarted := time.Now()
	if err := e.connect(url); err != nil {
		return err
	}
	loadBegan := time.Now()
	stopLoad := e.loadUntil(interval, agents)
	defer stopLoad() // on an early return

	// The spread.
	spread := fmt.Sprintf("each replica to own %d–%d agents", lo, hi)
	first, at, err := e.awaitOwners(all, agents, spreadDeadline, spread, spreadOver(holders, lo, hi))
	if err != nil {
		return err
	}
	e.note("spread %s, %s after the last replica was ready", first.spread(holders), secs(at.Sub(allStarted)))

	// The kill.
	victim := first.busiest(holders)
	moved := first.of(victim)
	var survivors []string
	var rest []*service
	for _, name := range holders {
		if name != victim {
			survivors = append(survivors, name)
			rest = append(rest, reps[name])
		}
	}
	if err := sleep(e.ctx, time.Second); err != nil { // well into the load
		return err
	}
	if err := reps[victim].kill(); err != nil {
		return err
	}
	killed := time.Now()
	e.cleared(killed, moved, "")
	taken, at, err := e.awaitOwners(rest, agents, takeoverDeadline, "every agent to be owned by "+strings.Join(survivors, " or "), func(o owners) bool { return o.ownedBy(survivors) })
	if err != nil {
		return fmt.Errorf("takeover after the kill of %s: %w", victim, err)
	}
	took := at.Sub(killed)
	if err := e.tail.Poll(); err != nil {
		return err
	}
	even := len(agents) / len(survivors)
	e.note("%s killed, owning %s: every agent owned by %s %s after the kill (API%s), spread then %s%s",
		victim, list(moved), strings.Join(survivors, " or "), secs(took), takenOverLogged(e.led, killed, moved), taken.spread(survivors),
		when(!spreadOver(survivors, even-1, even+1)(taken), fmt.Sprintf(", outside the expected %d–%d", even-1, even+1)))
	if err := sleep(e.ctx, alone); err != nil {
		return err
	}

	// The rejoin.
	if err := e.start(reps[victim]); err != nil {
		return err
	}
	restarted := reps[victim].starts[len(reps[victim].starts)-1]
	ready := time.Now()
	again, at, err := e.awaitOwners(all, agents, spreadDeadline, spread+" again", spreadOver(holders, lo, hi))
	if err != nil {
		return fmt.Errorf("rejoin of %s: %w", victim, err)
	}
	e.note("%s restarted: spread %s again %s after the restart (%s after it was ready)", victim, again.spread(holders), secs(at.Sub(restarted)), secs(at.Sub(ready)))
	if err := sleep(e.ctx, after); err != nil {
		return err
	}
	diffs, err := e.checkMetrics(all, again, agents)
	if err != nil {
		return err
	}
	if len(diffs) == 0 {
		e.note("metrics agree with the API: agent_worker_agent_owned 1 on the owner only, agent_worker_replicas %d on each", len(all))
	} else {
		return fmt.Errorf("metrics disagree with the API: %s", strings.Join(diffs, "; "))
	}
	loadEnded := time.Now()
	if err := stopLoad(); err != nil {
		return err
	}
	if err := e.drain(drainTimeout, agents); err != nil {
		return err
	}
	joinErr := e.noteJoin(victim, restarted, loadEnded, joinBound)
	heldErr := e.noteHeld(moved, loadBegan, killed, takeoverDeadline)
	if slow, n := e.slowest(loadBegan, restarted); n > 0 {
		e.note("before the restart the slowest message (%s to %s%s) was handled %s after its publish", slow.id, slow.agent, when(slices.Contains(moved, slow.agent), ", an agent that moved"), secs(slow.took))
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
		parts = append(parts, fmt.Sprintf("%s on %s %s (%q)", f.Agent, f.Source, f.Outcome, clip(f.Error, 120)))
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

// when returns s when cond holds, else "".
func when(cond bool, s string) string {
	if cond {
		return s
	}
	return ""
}

// human renders a round duration for a sentence: "5 s", "40 ms".
func human(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%d s", d/time.Second)
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

// numbered returns n names: prefix01, prefix02, ...
func numbered(prefix string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s%02d", prefix, i+1)
	}
	return names
}

// selfReschedule: an agent whose model asks for its next turn at once,
// every turn, for 20 s, while 20 inbox messages arrive.
func selfReschedule(e *env) error {
	const window, n = 20 * time.Second, 20
	e.story("One worker (embedded NATS) ran an agent with wake_on_start whose scripted model calls schedule_next_turn(wake_in_seconds: 0) in every turn, then ends the turn (no delay: a runaway model).")
	e.story("It ran for %s while %d inbox messages were published to it, one a second; the turns completed in those %s were counted (a bounded number is the point: at most limits.turn_burst plus limits.turns_per_hour's share, 20 + 2 with the defaults) and the messages accounted for.", secs(window), n, secs(window))
	e.story("Beside it, a second agent (a2) with the same model and sleep.min 1s got no messages at all: it woke only itself, at the earliest it may, with the same tool calls each time — the loop the watchdog's turn_repeat signal must halt.")
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	w, err := e.worker("r1", workerConf{natsListen: addr, agents: []string{"a1", "a2"}, script: rescheduleScript, wakeOnStart: true,
		extra: map[string]string{"a2": "    sleep: {min: 1s}\n"}})
	if err != nil {
		return err
	}
	if err := e.start(w); err != nil {
		return err
	}
	started := w.starts[0]
	if err := e.connect("nats://" + addr); err != nil {
		return err
	}
	for range n {
		if _, err := e.pub.publish(e.ctx, "m", message{agent: "a1"}); err != nil {
			return err
		}
		if err := sleep(e.ctx, window/n); err != nil {
			return err
		}
	}
	if d := time.Until(started.Add(window)); d > 0 {
		if err := sleep(e.ctx, d); err != nil {
			return err
		}
	}
	if err := e.tail.Poll(); err != nil {
		return err
	}
	turns := e.led.Turns("a1", started, started.Add(window))
	e.note("a1: %d turns completed in the first %s (%.1f per second)", turns, secs(window), float64(turns)/window.Seconds())
	st, err := w.status(e.ctx, "a2")
	if err != nil {
		return err
	}
	if st.State != "halted" {
		return fmt.Errorf("a2, rescheduling itself every second with no input, was not halted: state %s after %d turns", st.State, st.Turns)
	}
	e.note("a2: halted after %d turns (%q)", st.Turns, st.HaltReason)
	return e.drain(drainTimeout, one)
}

// list renders names for a sentence: "a1, a2" or "none".
func list(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// durableTurn: a worker whose every turn publishes a report and then
// waits for the model is killed with SIGKILL in that wait, five times; the
// turns resume from their journals after each restart.
func durableTurn(e *env) error {
	_, url, err := e.nats()
	if err != nil {
		return err
	}
	prov, err := newProvider(1500 * time.Millisecond)
	if err != nil {
		return err
	}
	defer prov.close()
	if err := os.Setenv("CHAOS_PROVIDER_KEY", "chaos"); err != nil {
		return err
	}
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	reports, err := js.CreateStream(e.ctx, jetstream.StreamConfig{Name: "REPORTS", Subjects: []string{"ops.reports.>"}, Duplicates: 10 * time.Minute})
	if err != nil {
		return err
	}
	model := fmt.Sprintf("    provider: openai\n    model: gpt-chaos\n    base_url: %q\n    api_key_env: CHAOS_PROVIDER_KEY\n", prov.URL)
	w, err := e.worker("r1", workerConf{natsURL: url, agents: one, model: model, tools: []string{"publish"},
		extra: map[string]string{"a1": "    publish: [\"ops.reports.>\"]\n"}, unthrottled: true})
	if err != nil {
		return err
	}
	if err := e.start(w); err != nil {
		return err
	}
	if err := e.connect(url); err != nil {
		return err
	}
	const kills = 5
	e.story("One worker on an external nats-server, its model a fake provider speaking OpenAI's Chat Completions format over HTTP, received a message every 250 ms until the last kill's turn had resumed and completed.")
	e.story("Every turn's first model call asks for the publish tool (a report on ops.reports.chaos, captured by a stream with a 10-minute duplicate window); the second call, which ends the turn, is answered after 1.5 s.")
	e.story("The worker was killed with SIGKILL %d times, each while a second call was waiting (the report published, the turn not ended), and restarted at once; the next kill waited for a turn to complete after the restart.", kills)
	e.story("Promises checked beyond the counts: exactly one report per completed turn, and exactly one first-step model request per completed turn (a resumed turn replays its recorded steps). Recovery: from each restart to the first completed turn after it (the resumed turn, which waits for its messages' redelivery: the 5 s ack wait).")
	stop := e.loadUntil(250*time.Millisecond, one)
	landed := 0
	completed := func() int {
		_ = e.tail.Poll()
		return e.led.Turns("a1", time.Time{}, time.Now().Add(time.Hour))
	}
	for range kills {
		err := poll(e.ctx, 10*time.Second, 10*time.Millisecond, "a second model call in flight", func() (bool, error) {
			_, _, in := prov.Counts()
			return in > 0, nil
		})
		if err != nil {
			e.note("no second model call in flight within 10 s; that kill was skipped")
			continue
		}
		landed++
		if err := w.kill(); err != nil {
			return err
		}
		before := completed()
		if err := e.start(w); err != nil {
			return err
		}
		e.cleared(w.starts[len(w.starts)-1], one, "")
		if err := poll(e.ctx, 60*time.Second, 50*time.Millisecond, "a turn completed after the restart", func() (bool, error) {
			return completed() > before, nil
		}); err != nil {
			return err
		}
	}
	if err := stop(); err != nil {
		return err
	}
	if err := e.drain(drainTimeout, one); err != nil {
		return err
	}
	if err := e.tail.Poll(); err != nil {
		return err
	}
	info, err := reports.Info(e.ctx)
	if err != nil {
		return err
	}
	turns := e.led.Turns("a1", time.Time{}, time.Now().Add(time.Hour))
	first, second, _ := prov.Counts()
	resumed := 0
	if b, err := os.ReadFile(w.log); err == nil {
		resumed = strings.Count(string(b), "turn resumes an unfinished turn")
	}
	e.note("%d kill(s) landed between a report and its turn's end; %d turn(s) resumed from their journals", landed, resumed)
	e.note("%d completed turns, %d reports on the stream, %d first-step and %d second-step model requests", turns, info.State.Msgs, first, second)
	if int(info.State.Msgs) != turns {
		e.broken("%d reports for %d completed turns: a side effect was repeated or lost", info.State.Msgs, turns)
	}
	if first != turns {
		e.broken("%d first-step model requests for %d completed turns: a recorded step was asked again", first, turns)
	}
	if resumed < landed {
		e.broken("%d kill(s) landed mid-turn but only %d turn(s) resumed", landed, resumed)
	}
	return nil
}
