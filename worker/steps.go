package worker

import (
	"context"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/natsbus"
	"github.com/agent-worker/agent-worker/scheduler"
)

// A step brings up one part of the worker; its stop takes that part down
// again. Start runs the steps in order; Stop, and a Start that fails,
// undo them in reverse (unwind). A step that fails is undone too, so a
// stop undoes whatever its start got to: it checks what exists.
type step struct {
	start func(w *Worker, s *starting) error
	// stop undoes start; nil: nothing to undo. grace bounds how long Stop
	// lets the running turns finish; only the last step's stop (drain)
	// waits on it, and a failed Start never reaches that one.
	stop func(w *Worker, grace context.Context)
}

// steps are the worker's parts in the order Start brings them up. Undone
// in reverse they give the order of shutdown: out of service first
// (drain: the API, the control subject, the leases handed over, the
// turns drained, spend stored, leases released, the membership left),
// then the API's last requests, the input and the loops, the subagents,
// the MCP servers, the bus's readers (events stream, metrics), the
// health probes, the store and NATS last.
var steps = []step{
	{(*Worker).connectNATS, (*Worker).closeNATS},
	{(*Worker).startStore, (*Worker).closeStore},
	{(*Worker).loadSeal, nil},
	{(*Worker).initHealth, (*Worker).stopHealth},
	{(*Worker).initBus, (*Worker).stopBusReaders},
	{(*Worker).ensureStreams, nil},
	{(*Worker).startMCP, (*Worker).closeMCP},
	{(*Worker).resolveSpecs, nil},
	{(*Worker).initScheduler, nil},
	{(*Worker).initGuards, nil},
	{(*Worker).initSubagents, (*Worker).stopSubagents},
	{(*Worker).initDriver, nil}, // drained by drain
	{(*Worker).startSubagents, nil},
	{(*Worker).initMetrics, nil}, // its reader stops with the bus's
	{(*Worker).probeExposure, nil},
	{(*Worker).startHealth, nil}, // stopped by stopHealth
	{(*Worker).startEvents, nil}, // its reader stops with the bus's
	{(*Worker).runLoops, (*Worker).stopLoops},
	{(*Worker).serveControl, (*Worker).stopControl},
	{(*Worker).startLeases, (*Worker).releaseLeases},
	{(*Worker).startAPI, (*Worker).closeAPI},
	{(*Worker).wakeOnStart, (*Worker).drain}, // cannot fail
}

// starting is what the steps of one Start share.
type starting struct {
	ctx      context.Context
	cfg      *config.Config
	o        Options
	subjects natsbus.Subjects
	specs    []driver.Spec // the agents as the driver runs them (resolveSpecs)
	sched    *scheduler.Scheduler
}

// unwind undoes the first n steps, the last first.
func (w *Worker) unwind(n int, grace context.Context) {
	for i := n - 1; i >= 0; i-- {
		if stop := steps[i].stop; stop != nil {
			stop(w, grace)
		}
	}
}
