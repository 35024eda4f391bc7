package main

import (
	"time"
)

// natsRestart: an external nats-server killed with SIGKILL and restarted
// on the same port and store directory under load.
func natsRestart(e *env) error {
	ns, url, err := e.nats()
	if err != nil {
		return err
	}
	if _, err := e.startWorker(workerConf{natsURL: url, agents: one, script: handledScript, unthrottled: true}, url); err != nil {
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
	if _, err := e.startWorker(workerConf{natsURL: url, storeURL: rurl, agents: one, script: handledScript, unthrottled: true}, url); err != nil {
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
