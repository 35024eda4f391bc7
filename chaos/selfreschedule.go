package main

import (
	"fmt"
	"time"
)

// selfReschedule: an agent whose model asks for its next turn at once,
// every turn, for 20 s, while 20 inbox messages arrive.
func selfReschedule(e *env) error {
	const window, n = 20 * time.Second, 20
	e.story("One worker (embedded NATS) ran an agent with wake_on_start whose scripted model calls schedule_next_turn(wake_in_seconds: 0) in every turn, then ends the turn (no delay: a runaway model).")
	e.story("It ran for %s while %d inbox messages were published to it, one a second; the turns completed in those %s were counted (a bounded number is the point: at most limits.turn_burst plus limits.turns_per_hour's share, 20 + 2 with the defaults) and the messages accounted for.", secs(window), n, secs(window))
	e.story("Beside it, a second agent (a2) with the same model and sleep.min 1s got no messages at all: it woke only itself, at the earliest it may, with the same tool calls each time — the loop the watchdog's turn_repeat signal must halt.")
	w, err := e.embeddedWorker(workerConf{agents: []string{"a1", "a2"}, script: rescheduleScript, wakeOnStart: true,
		extra: map[string]string{"a2": "    sleep: {min: 1s}\n"}})
	if err != nil {
		return err
	}
	started := w.starts[0]
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
