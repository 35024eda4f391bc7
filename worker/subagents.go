package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/agent-worker/agent-worker/background"
	"github.com/agent-worker/agent-worker/background/distributed"
	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/natsbus"
)

// initSubagents makes the subagent manager; startSubagents starts it.
func (w *Worker) initSubagents(s *starting) error {
	w.subagents = background.New(w.subagentOptions(s.cfg, s.o))
	return nil
}

func (w *Worker) stopSubagents(context.Context) {
	if w.subagents != nil { // after Stop's drain a no-op; after a failed Start, stops its loops
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		w.subagents.Shutdown(ctx)
	}
}

// startSubagents registers the agents that spawn subagents and starts the
// subagent manager.
func (w *Worker) startSubagents(s *starting) error {
	if err := w.addSubagents(s.ctx, s.cfg, s.o); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}

// subagentOptions configures the subagent manager. With JetStream its
// subagents run anywhere: jobs in the work-queue stream
// <nats.stream>_SUBAGENTS that every replica with room
// (subagents.max_per_replica) takes, their reports, charges and stops
// over NATS (package background/distributed). Without, each runs in its
// parent's process.
func (w *Worker) subagentOptions(cfg *config.Config, o Options) background.Options {
	opts := background.Options{Clock: o.Clock, Log: o.Log, Events: w.bus, Charger: w.guard, Replica: holderName(cfg)}
	if w.conn.JS == nil {
		return opts
	}
	d := distributed.Options{MaxPerReplica: 8}
	if n := cfg.Subagents.MaxPerReplica; n != nil {
		d.MaxPerReplica = *n
	}
	d.JetStream, d.NATS, d.Store = w.conn.JS, w.conn.NC, w.store
	d.Subjects = natsbus.Subjects{Prefix: cfg.NATS.SubjectPrefix}
	d.Stream, d.DuplicateWindow, d.Replicas = cfg.NATS.Stream+"_SUBAGENTS", cfg.NATS.DuplicateWindow.D(), cfg.NATS.Replicas
	// A charges consumer per parent agent, the jobs consumer, and room
	// for agents added while replicas with the older config still run.
	d.MaxConsumers = max(serverMaxConsumers, 2*(len(cfg.Agents)+1))
	d.AckWait, d.ReportMaxBytes = cfg.NATS.AckWait.D(), cfg.NATS.MaxMessageBytes
	d.Seal = w.seal
	opts.Distributed = distributed.New(d)
	return opts
}

// serverMaxConsumers is nats-server's default consumer limit per stream
// (JetStream's default_max_consumers), which the subagent stream's own
// limit never goes below.
const serverMaxConsumers = 1000

// addSubagents registers every agent granted spawn_subagent with the
// subagent manager: a fresh model instance per subagent (the agent's
// model unless subagents.model names another), priced like any model,
// and only the tools subagents.tools grants. Then it starts the manager
// (with JetStream: the jobs stream, and taking jobs here).
func (w *Worker) addSubagents(ctx context.Context, cfg *config.Config, o Options) error {
	specs, err := w.subagentSpecs(ctx, cfg, o)
	if err != nil {
		return err
	}
	for name, spec := range specs {
		w.subagents.Add(name, currentAgent{w.driver, name}, spec) // a reload may replace the agent
	}
	return w.subagents.Start(ctx)
}

// subagentHost lets a subagent's report_done reach its parent's events;
// subagents cannot schedule wakes.
type subagentHost struct {
	bus   *events.Bus
	agent string
	clock clock.Clock
}

func (h subagentHost) Now() time.Time { return h.clock.Now() }

func (h subagentHost) RequestWake(time.Time, string) {}

// ActionID is "": a subagent's run has no journal and is never resumed, so
// its publishes carry no idempotency key.
func (h subagentHost) ActionID(string) string { return "" }

func (h subagentHost) ReportDone(summary string, details map[string]any) {
	h.bus.Publish(events.Event{Time: h.clock.Now(), Agent: h.agent, Type: events.ReportDone,
		Data: map[string]any{"summary": summary, "details": details, "by": "subagent"}})
}
