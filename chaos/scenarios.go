package main

import "time"

// scenario is one fault and its load.
type scenario struct {
	name, title string
	run         func(e *env) error
	// timeout, when longer than -scenario-timeout, is this scenario's
	// own bound (a start at a quarter of a core takes minutes).
	timeout time.Duration
}

// scenarios run in this order; -run selects them by name.
var scenarios = []scenario{
	{name: "kill9", title: "kill -9 mid-turn, 5 times", run: kill9},
	{name: "nats-restart", title: "NATS server kill -9 and restart under load", run: natsRestart},
	{name: "redis-down", title: "Redis down 10 s under load", run: redisDown},
	{name: "backlog", title: "backlog of 1000 deferred + 20 inbox while down", run: backlog},
	{name: "large-batch", title: "25 messages of 50 KB released from a pause", run: largeBatch},
	{name: "replica-killed", title: "3 replicas, 12 agents: the busiest killed -9, then restarted", run: replicaKilled},
	{name: "self-reschedule", title: "a model that reschedules itself at once", run: selfReschedule},
	{name: "durable-turn", title: "kill -9 between a turn's side effect and its end, 5 times", run: durableTurn},
	{name: "shared-kill", title: "2 agents binding one subject, and a replica killed -9", run: sharedKill},
	{name: "pause", title: "each of 2 replicas frozen (SIGSTOP) for 10 s mid-turn, state in KV", run: pause},
	{name: "pause-redis", title: "each of 2 replicas frozen (SIGSTOP) for 10 s mid-turn, state in Redis", run: pauseRedis},
	{name: "starve", title: "10,000 agents held to a quarter core (cgroup CPU quota), a 10,000-message burst", run: starve, timeout: starveReady + starveDrain + time.Minute},
}

// drainTimeout bounds the wait for the last messages after a scenario's
// load, once the fault is over.
const drainTimeout = 45 * time.Second

var one = []string{"a1"}
