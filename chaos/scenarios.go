package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
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
	{"replica-killed", "the replica owning most agents killed", replicaKilled},
	{"self-reschedule", "a model that reschedules itself at once", selfReschedule},
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

// replicaKilled: two replicas share four agents; the one owning most is
// killed with SIGKILL under load and the other must take its agents over.
func replicaKilled(e *env) error {
	agents := []string{"a1", "a2", "a3", "a4"}
	const n = 240
	e.story("Two replicas (lease holders r1 and r2, lease ttl 3 s, ack_wait 5 s) shared one external nats-server and its KV store, with four agents; %d messages went round-robin to the four, one every 40 ms.", n)
	e.story("Once every agent had completed a turn, the replica owning most agents was killed with SIGKILL a second later and not restarted; the other had to take its agents over.")
	e.story("Recovery: from the kill to the first completed turn on the survivor of an agent that moved.")
	_, url, err := e.nats()
	if err != nil {
		return err
	}
	reps := map[string]*service{}
	for _, name := range []string{"r1", "r2"} {
		w, err := e.worker(name, workerConf{natsURL: url, agents: agents, script: handledScript, unthrottled: true})
		if err != nil {
			return err
		}
		if err := e.start(w); err != nil {
			return err
		}
		reps[name] = w
	}
	if err := e.connect(url); err != nil {
		return err
	}
	done := e.pub.steady(e.ctx, n, 40*time.Millisecond, agents)

	// Who owns what: the API's standby flag when it shows one, else the
	// replica whose log has the agent's latest completed turn.
	owner := map[string]string{}
	how := "the logs (latest completed turn; the API showed no standby flag)"
	err = poll(e.ctx, 20*time.Second, 100*time.Millisecond, "every agent to have an owner", func() (bool, error) {
		if err := e.tail.Poll(); err != nil {
			return false, err
		}
		for _, a := range agents {
			var active []string
			flagged := false
			for _, name := range []string{"r1", "r2"} {
				st, err := reps[name].status(e.ctx, a)
				if err != nil {
					continue
				}
				flagged = flagged || st.Standby != nil
				if st.Standby == nil || !*st.Standby {
					active = append(active, name)
				}
			}
			if flagged && len(active) == 1 {
				owner[a], how = active[0], "the API's standby flag"
			} else {
				owner[a] = e.led.LastSource(a)
			}
			if owner[a] == "" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	owned := map[string][]string{}
	for _, a := range agents {
		owned[owner[a]] = append(owned[owner[a]], a)
	}
	victim, survivor := "r1", "r2"
	if len(owned["r2"]) > len(owned["r1"]) {
		victim, survivor = "r2", "r1"
	}
	if err := sleep(e.ctx, time.Second); err != nil { // well into the load
		return err
	}
	if err := reps[victim].kill(); err != nil {
		return err
	}
	e.cleared(time.Now(), owned[victim], survivor)
	e.note("ownership from %s: %s owned %s, %s owned %s; %s killed", how, victim, list(owned[victim]), survivor, list(owned[survivor]), victim)
	if err := e.wait(done); err != nil {
		return err
	}
	return e.drain(drainTimeout, agents)
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
