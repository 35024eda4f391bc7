package main

import (
	"time"
)

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
