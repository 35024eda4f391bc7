package main

import "time"

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
	{"pause", "each of 2 replicas frozen (SIGSTOP) for 10 s mid-turn, state in KV", pause},
	{"pause-redis", "each of 2 replicas frozen (SIGSTOP) for 10 s mid-turn, state in Redis", pauseRedis},
	{"starve", "10,000 agents held to a quarter core (cgroup CPU quota), a 10,000-message burst", starve},
}

// drainTimeout bounds the wait for the last messages after a scenario's
// load, once the fault is over.
const drainTimeout = 45 * time.Second

var one = []string{"a1"}
