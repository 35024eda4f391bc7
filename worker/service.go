package worker

import (
	"context"
	"time"

	"github.com/agent-worker/agent-worker/driver"
)

// wakeOnStart wakes the agents with wake_on_start: the worker is in
// service. Its stop is drain, which takes it out of service again.
func (w *Worker) wakeOnStart(s *starting) error {
	for _, a := range s.cfg.Agents {
		if a.WakeOnStart {
			ag, _ := w.driver.Agent(a.Name)
			ag.Wake(driver.Cause{Source: driver.SourceStartup})
		}
	}
	return nil
}

// drain takes the worker out of service, the stop of Start's last step:
// writes to the API get 503; the control subject is left; the other
// replicas place this one's agents; running turns and subagents may
// finish until grace ends, then are cancelled; spend not stored yet is
// stored and the leases released; the API's requests are awaited and
// the membership left.
func (w *Worker) drain(grace context.Context) {
	var apiStopped chan struct{}
	if w.api != nil {
		apiStopped = make(chan struct{})
		go func() {
			defer close(apiStopped)
			_ = w.api.Shutdown(grace)
		}()
	}
	if w.control != nil {
		_ = w.control.Unsubscribe()
		w.control = nil
	}
	if w.leases != nil {
		// The others place this replica's agents among themselves now;
		// each is handed over as soon as its running turn has finished.
		w.spread.leave()
		w.leases.Rebalance()
	}
	subsStopped := make(chan struct{})
	go func() {
		defer close(subsStopped)
		if w.subagents != nil {
			w.subagents.Shutdown(grace)
		}
	}()
	if w.driver != nil {
		w.driver.Shutdown(grace)
	}
	<-subsStopped
	if w.guard != nil {
		// Spend not stored yet (a write the store failed, still being
		// retried) is stored while this replica holds its leases.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = w.guard.Shutdown(ctx)
		cancel()
	}
	if w.leases != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		w.leases.Stop(ctx) // released to the replicas they are placed on, who take them at once
		cancel()
		w.leases = nil
	}
	if apiStopped != nil {
		<-apiStopped
	}
	w.spread.close()
}
