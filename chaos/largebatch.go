package main

import (
	"time"
)

// largeBatch: 25 bodies of about 50 KB queued while the agent is paused,
// then released in one resume.
func largeBatch(e *env) error {
	const n, pad = 25, 50_000
	e.story("One worker (embedded NATS, max_message_bytes 65536, the default) had its agent paused over the API; %d messages with bodies of about %d KB each were published to it and the harness waited until the API showed them queued.", n, (pad+100)/1000)
	e.story("Then the agent was resumed with about %.2f MB of messages queued: more than one turn takes (turn.max_input_bytes, 256 KiB), so the turns that follow take them in order, and more than one history record could hold before the history clipped message bodies.", float64(n*pad)/1e6)
	e.story("Recovery: from the resume to the first completed turn.")
	w, err := e.embeddedWorker(workerConf{agents: one, script: handledScript, unthrottled: true})
	if err != nil {
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
