// Package worker assembles the rooms — NATS, store, driver, inbox binding,
// control, events — into one running agent-worker, and takes it apart in
// the right order. It holds wiring only; every decision lives in the
// package it belongs to.
package worker

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"google.golang.org/adk/model"

	"github.com/agent-worker/agent-worker/access"
	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/background"
	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/events/eventstream"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/health"
	"github.com/agent-worker/agent-worker/inbox/natsinbox"
	"github.com/agent-worker/agent-worker/lease"
	"github.com/agent-worker/agent-worker/mcptools"
	"github.com/agent-worker/agent-worker/metrics"
	"github.com/agent-worker/agent-worker/natsbus"
	"github.com/agent-worker/agent-worker/seal"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/tracing"
)

// Options tune a Worker beyond its config, for tests and embedding.
type Options struct {
	Log   *slog.Logger
	Clock clock.Clock
	// Models, when set, supplies the model of an agent instead of
	// models.New (tests inject scripted models with hooks).
	Models func(agent string, def config.Model) (model.LLM, error)
	// Tracing exports the turns' spans (tracing.Start); nil: turns are
	// not traced. The caller shuts it down after Stop, so the last
	// turns' spans are sent.
	Tracing *tracing.Provider
	// Source re-reads the config the worker was started with (the file,
	// with the command's overrides), for ReloadConfig: SIGHUP and POST
	// /v1/reload. Nil: ReloadConfig refuses (Reload still applies a
	// config it is handed).
	Source func() (*config.Config, error)
}

// Worker is a running agent-worker.
type Worker struct {
	cfg   *config.Config
	log   *slog.Logger
	conn  *natsbus.Conn
	store store.Store // counted: storeOps
	// renewal is the store the lease renewals go through, on a
	// connection of its own (renewalNC for nats://; store.go).
	renewal   store.Store
	renewalNC *nats.Conn
	// seal is the deployment's sealing key (package seal).
	seal seal.Key
	// exposed says what a NATS client without credentials could reach
	// that only the worker may (probeExposure); nil: nothing.
	exposed atomic.Pointer[string]
	// storeOps counts the store's operations once the metrics exist.
	storeOps    atomic.Pointer[metrics.Metrics]
	bus         *events.Bus
	driver      *driver.Driver
	binding     *natsinbox.Binding
	guard       *guard.Guard
	subagents   *background.Manager
	mcp         *mcptools.Servers      // set by Start, with or without mcp_servers (a reload may add some)
	deadLetters *natsinbox.DeadLetters // nil in core NATS mode
	leases      *lease.Manager
	health      *health.Monitor
	api         *api.Server
	apiDone     chan struct{}
	apiAddr     string
	metrics     *metrics.Metrics
	stopMetrics func()
	control     *nats.Subscription
	ctl         *control.Control // carries verbs and views to each agent's owner
	tokens      *access.Tokens   // the API's and the control subject's credentials
	owner       leaseOwner       // fences durable writes: owned = lease held
	stopEv      func()
	events      *eventstream.Stream // the durable events stream; nil in core NATS mode (events.go)
	cancel      context.CancelFunc
	// refused is the input stream's last refusal of the worker's own
	// publishes (refusal.go), for /readyz.
	refused refusal

	// spread shares the agents with the other replicas (membership.go).
	spread spread

	// reload re-reads and applies the config (reload.go).
	reload reloadState
}

// Start brings the worker up: NATS (embedded or external), the state
// store, the stream, the agents' loops, their input log, the control
// subject and the events forwarder. On error everything started is
// stopped again.
func Start(ctx context.Context, cfg *config.Config, o Options) (*Worker, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	w := &Worker{cfg: cfg, log: o.Log}
	w.reload.init(cfg, o)
	s := &starting{ctx: ctx, cfg: cfg, o: o, subjects: natsbus.Subjects{Prefix: cfg.NATS.SubjectPrefix}}
	for i, st := range steps {
		if err := st.start(w, s); err != nil {
			// Nothing to drain: the last step, which drains, cannot fail.
			noGrace, cancel := context.WithCancel(context.Background())
			cancel()
			w.unwind(i+1, noGrace)
			return nil, err
		}
	}
	return w, nil
}

// Driver returns the agents' driver.
func (w *Worker) Driver() *driver.Driver { return w.driver }

// Events returns the worker's event bus.
func (w *Worker) Events() *events.Bus { return w.bus }

// NATS returns the worker's NATS connection.
func (w *Worker) NATS() *natsbus.Conn { return w.conn }

// Metrics returns the worker's Prometheus metrics.
func (w *Worker) Metrics() *metrics.Metrics { return w.metrics }

// Guard returns the cost guardrails.
func (w *Worker) Guard() *guard.Guard { return w.guard }

// Store returns the state store.
func (w *Worker) Store() store.Store { return w.store }

// Stop shuts the worker down: writes to the API get 503; no new turns;
// running turns may finish until grace ends, then are cancelled (their
// messages stay in the log, below no cursor); then NATS and the store
// close. It undoes Start's steps, the last first (steps.go).
func (w *Worker) Stop(grace context.Context) {
	w.unwind(len(steps), grace)
}
