package main

import (
	"math/rand/v2"
	"time"
)

// kill9: one worker with its embedded NATS, killed with SIGKILL five
// times under a steady load, restarted each time on the same data.
func kill9(e *env) error {
	w, err := e.embeddedWorker(workerConf{agents: one, script: handledScript, unthrottled: true})
	if err != nil {
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
