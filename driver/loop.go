package driver

import (
	"context"

	"github.com/agent-worker/agent-worker/events"
)

// stop closes the gate for good (Shutdown).
func (a *Agent) stop() {
	a.mu.Lock()
	if !a.gate.stopping {
		close(a.done)
	}
	a.gate.stopping = true
	running := a.running
	a.mu.Unlock()
	a.emit(events.Stopping, map[string]any{"turn_running": running})
	a.poke()
}

func (a *Agent) cancelRunning(cause error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cancelTurn != nil {
		a.cancelTurn(cause)
	}
}

// loop waits for wakes and runs turns until the agent is stopped or ctx
// ends.
func (a *Agent) loop(ctx context.Context) {
	defer func() {
		a.mu.Lock()
		a.stopped = true
		a.mu.Unlock()
		a.log.Info("agent stopped")
	}()
	a.poke() // restore at once (if this replica owns the agent)
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.signal:
		}
		if a.needsRestore() {
			// Owned and not yet (or no longer) in step with the store:
			// load pause, trips and timer state before any turn.
			if !a.restoreWithRetry(ctx) {
				return
			}
		}
		for {
			a.storeSettled() // cursors that dead letters let pass
			a.fill(ctx)      // the log's news, into the inbox
			c, ok := a.admit(ctx)
			if !ok {
				break
			}
			a.turn(c)
			a.foldMemory(ctx) // between turns: one model call at most
		}
		a.foldMemory(ctx) // a retried or forced fold, no turn waiting
		a.mu.Lock()
		done := a.gate.stopping
		a.mu.Unlock()
		if done {
			return
		}
	}
}
