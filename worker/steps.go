package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/background"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/inbox/natsinbox"
	"github.com/agent-worker/agent-worker/mcptools"
	"github.com/agent-worker/agent-worker/metrics"
	"github.com/agent-worker/agent-worker/natsbus"
	"github.com/agent-worker/agent-worker/scheduler"
	"github.com/agent-worker/agent-worker/seal"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/watchdog"
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

// connectNATS connects to NATS, embedded or external.
func (w *Worker) connectNATS(s *starting) error {
	var err error
	w.conn, err = natsbus.Connect(s.cfg.NATS, s.cfg.DataDir, s.o.Log)
	if err != nil {
		return classify(err)
	}
	return nil
}

func (w *Worker) closeNATS(context.Context) {
	if w.conn != nil {
		w.conn.Close()
	}
}

// startStore opens the state store.
func (w *Worker) startStore(s *starting) error {
	st, err := openStore(s.ctx, s.cfg.Store, s.cfg.NATS.Replicas, w.conn, s.o.Log)
	if err != nil {
		return classify(err)
	}
	// Every round trip to the store is counted, once the metrics exist
	// (agent_worker_store_operations_total).
	w.store = store.Observed(st, func(op string, err error) {
		if m := w.storeOps.Load(); m != nil {
			m.StoreOperation(op, store.Outcome(err))
		}
	})
	return nil
}

func (w *Worker) closeStore(context.Context) {
	if w.store != nil {
		_ = w.store.Close()
	}
}

// loadSeal loads the deployment's sealing key: what the worker publishes
// with a meaning a stranger must not claim carries its seal.
func (w *Worker) loadSeal(s *starting) error {
	var err error
	w.seal, err = seal.Load(s.ctx, w.store)
	return err
}

// initHealth makes the monitor of the worker's dependencies; startHealth
// starts its probes.
func (w *Worker) initHealth(s *starting) error {
	w.health = newHealth(w.conn, w.store, s.o)
	return nil
}

func (w *Worker) stopHealth(context.Context) {
	if w.health != nil {
		w.health.Stop()
	}
}

// initBus makes the event bus, which every later step publishes on.
func (w *Worker) initBus(s *starting) error {
	w.bus = events.NewBus(0, s.o.Log)
	return nil
}

// stopBusReaders stops the bus's readers: the events stream's forwarder
// (startEvents) and the metrics' observer (initMetrics). They attach in
// later steps but stop here, after everything that publishes events.
func (w *Worker) stopBusReaders(context.Context) {
	if w.stopEv != nil { // after everything that publishes events
		w.stopEv()
	}
	if w.stopMetrics != nil {
		w.stopMetrics()
	}
}

// ensureStreams readies the JetStream streams: the input stream and the
// dead letters'.
func (w *Worker) ensureStreams(st *starting) error {
	ctx, cfg, o, subjects := st.ctx, st.cfg, st.o, st.subjects
	if w.conn.JS == nil {
		o.Log.Warn("without JetStream dead letters are published on <prefix>.<agent>.dlq but not kept: only a subscriber at that moment sees them")
		return nil
	}
	// The input stream is the agents' log (package natsinbox): limits
	// retention, read with direct gets, purged below the agents'
	// cursors; a full subject or stream refuses its publisher rather
	// than dropping what waits.
	perSubject, maxBytes, maxAge := cfg.NATS.InputLimits()
	spec := natsbus.StreamSpec{Name: cfg.NATS.Stream, DuplicateWindow: cfg.NATS.DuplicateWindow.D(), Replicas: cfg.NATS.Replicas,
		Subjects: []string{subjects.AllInboxes(), subjects.AllDeferred()}, Limits: true, AllowDirect: true, DiscardNew: true,
		MaxMsgsPerSubject: perSubject, MaxBytes: maxBytes, MaxAge: maxAge}
	if maxAge == 0 {
		spec.MaxAge = -1 // none: a message stays until handled
	}
	for _, a := range cfg.Agents {
		for _, s := range a.Subscribe {
			spec.Subjects = append(spec.Subjects, s.Subject)
		}
	}
	// A stream of the layout before the log (a consumer per agent) is
	// converted first, keeping every agent's place (upgrade.go).
	if err := natsinbox.Upgrade(ctx, w.conn.JS, cfg.NATS.Stream, logAgents(cfg, nil), subjects, w.store, o.Log); err != nil {
		return err
	}
	if _, err := natsbus.EnsureStream(ctx, w.conn.JS, spec, o.Log); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	dlq := natsinbox.DeadLetterStream(cfg.NATS.Stream+"_DLQ", subjects, cfg.NATS.DLQMaxAge.D(), cfg.NATS.DLQMaxBytes, cfg.NATS.Replicas)
	if _, err := natsbus.EnsureStream(ctx, w.conn.JS, dlq, o.Log); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	w.deadLetters = &natsinbox.DeadLetters{JS: w.conn.JS, Stream: dlq.Name, Subjects: subjects}
	return nil
}

// startMCP starts the MCP servers' clients; without servers too: a
// reload may add some.
func (w *Worker) startMCP(s *starting) error {
	var err error
	w.mcp, err = mcptools.Start(s.cfg.MCPServers, mcptools.Options{Log: s.o.Log})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}

func (w *Worker) closeMCP(context.Context) {
	if w.mcp != nil { // after the driver: no turn calls a tool any more
		w.mcp.Close()
	}
}

// resolveSpecs resolves the agents into what the driver runs.
func (w *Worker) resolveSpecs(s *starting) error {
	var err error
	s.specs, err = buildSpecs(s.ctx, s.cfg, s.o, w.bus, w.mcp)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}

// initScheduler makes the agents' timers' scheduler.
func (w *Worker) initScheduler(s *starting) error {
	s.sched = scheduler.New(scheduler.Options{Store: w.store, Clock: s.o.Clock, Log: s.o.Log, Events: w.bus, Owner: &w.owner})
	return nil
}

// initGuards makes the cost guardrails and the watchdog, and sets each
// agent's budgets and limits.
func (w *Worker) initGuards(s *starting) error {
	cfg, o := s.cfg, s.o
	loc, err := time.LoadLocation(cfg.Guardrails.Timezone)
	if err != nil {
		return fmt.Errorf("%w: guardrails.timezone: %w", ErrConfig, err)
	}
	w.guard = guard.New(guard.Options{Store: w.store, Clock: o.Clock, Log: o.Log, Events: w.bus,
		Prices: guard.NewPrices(cfg.Pricing), Location: loc, WorkerDailyUSD: cfg.Guardrails.WorkerDailyUSD, Owner: &w.owner})
	for i, a := range cfg.Agents {
		guardAgent(w.guard, a, s.specs[i])
	}
	wd := watchdog.New(watchdog.Options{Log: o.Log, Events: w.bus, Clock: o.Clock, Tripper: w.guard})
	w.reload.watchdog = wd
	for _, a := range cfg.Agents {
		watchAgent(wd, a)
	}
	return nil
}

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

// initDriver makes the agents' driver; runLoops starts their loops.
func (w *Worker) initDriver(s *starting) error {
	cfg, o := s.cfg, s.o
	var err error
	w.driver, err = driver.New(driver.Deps{Clock: o.Clock, Store: w.store, Events: w.bus, Log: o.Log,
		Publisher: natsbus.Publisher{NC: w.conn.NC}, SubjectPrefix: cfg.NATS.SubjectPrefix, Scheduler: s.sched, Guards: []driver.Guard{w.guard, w.reload.watchdog, w.subagents.Guard()},
		Subagents: w.subagents, Leased: true, Health: w.health, Tracer: o.tracer()}, s.specs)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}

// startSubagents registers the agents that spawn subagents and starts the
// subagent manager.
func (w *Worker) startSubagents(s *starting) error {
	if err := w.addSubagents(s.ctx, s.cfg, s.o); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}

// initMetrics makes the Prometheus metrics and has them observe the bus.
func (w *Worker) initMetrics(s *starting) error {
	cfg := s.cfg
	var infos []metrics.AgentInfo
	for i, a := range cfg.Agents {
		infos = append(infos, w.metricInfo(cfg, a, s.specs[i]))
	}
	w.metrics = metrics.NewWith(infos, gauges{w},
		metrics.Options{PerAgent: metrics.PerAgent(cfg.Metrics.PerAgent)})
	w.storeOps.Store(w.metrics)
	w.metrics.SetConfigHash(ConfigHash(cfg))
	w.stopMetrics = w.metrics.Observe(w.bus)
	return nil
}

// startHealth starts the health probes; the driver resumes when the
// dependencies are back.
func (w *Worker) startHealth(*starting) error {
	w.health.OnChange(func(up bool) {
		if up {
			w.driver.Recovered()
		}
	})
	w.health.Start()
	return nil
}

// runLoops binds the agents to their input log and starts their loops.
func (w *Worker) runLoops(s *starting) error {
	ctx, cfg, o := s.ctx, s.cfg, s.o
	var err error
	w.binding, err = natsinbox.Start(ctx, w.conn.NC, w.conn.JS, logAgents(cfg, w.driver), natsinbox.Options{
		Subjects: s.subjects, Stream: cfg.NATS.Stream, MaxBytes: cfg.NATS.MaxMessageBytes, DuplicateWindow: cfg.NATS.DuplicateWindow.D(),
		Store: w.store, Events: w.bus, Log: o.Log, Clock: o.Clock, Leased: true, Seal: w.seal, ReadAheadBytes: cfg.NATS.ReadAheadBytes,
		Holder: holderName(cfg), Live: w.replicaLive,
	})
	if err != nil {
		return err
	}
	if w.conn.JS != nil {
		w.driver.SetInput(w.binding) // before the loops start: they read it
	}
	loops, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w.cancel = cancel
	return w.driver.Start(loops)
}

// stopLoops stops the input, then the loops.
func (w *Worker) stopLoops(context.Context) {
	if w.binding != nil {
		w.binding.Stop()
	}
	if w.cancel != nil {
		w.cancel()
	}
}

// serveControl listens on every agent's control subject. Every replica
// does, and answers for the agents it owns only; verbs sent to any
// replica (HTTP or NATS) reach the owner.
func (w *Worker) serveControl(s *starting) error {
	cfg, o, subjects := s.cfg, s.o, s.subjects
	holder := holderName(cfg)
	// One token set for the API and the control subject: a reload
	// (ReloadTokens) reaches both at once.
	var err error
	if w.tokens, err = loadTokens(cfg.API.Tokens); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	w.ctl, err = control.New(control.Options{Driver: w.driver, Guard: w.guard, Scheduler: s.sched, Owner: &w.owner,
		Holder: holder, Conn: w.conn.NC, Subjects: subjects, Log: o.Log,
		Tokens: w.tokens, Seal: w.seal, LoopbackNATS: w.conn.Embedded && cfg.NATS.EmbeddedOnLoopback(),
		View: api.LocalView(api.ViewOptions{Driver: w.driver, Guard: w.guard, Scheduler: s.sched, Subagents: w.subagents, Holder: holder})})
	if err != nil {
		return err
	}
	w.control, err = w.ctl.ServeNATS()
	if err != nil {
		return fmt.Errorf("serve %s: %w", subjects.AllControl(), err)
	}
	return nil
}

func (w *Worker) stopControl(context.Context) {
	if w.control != nil {
		_ = w.control.Unsubscribe()
	}
}

// releaseLeases lets the leases go after a failed Start; after Stop's
// drain, which released them and left the membership, there are none.
func (w *Worker) releaseLeases(context.Context) {
	if w.leases == nil {
		return
	}
	w.spread.leave()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	w.leases.Stop(ctx)
	cancel()
	w.spread.close()
}

// closeAPI waits for the operator API's last requests (a second at most).
func (w *Worker) closeAPI(context.Context) {
	if w.api != nil && w.apiDone != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = w.api.Shutdown(ctx)
		cancel()
		<-w.apiDone
	}
}

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
