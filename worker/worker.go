// Package worker assembles the rooms — NATS, store, driver, inbox binding,
// control, events — into one running agent-worker, and takes it apart in
// the right order. It holds wiring only; every decision lives in the
// package it belongs to.
package worker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/adk/model"
	"google.golang.org/adk/tool"

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
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/inbox/natsinbox"
	"github.com/agent-worker/agent-worker/lease"
	"github.com/agent-worker/agent-worker/mcptools"
	"github.com/agent-worker/agent-worker/metrics"
	"github.com/agent-worker/agent-worker/models"
	"github.com/agent-worker/agent-worker/natsbus"
	"github.com/agent-worker/agent-worker/scheduler"
	"github.com/agent-worker/agent-worker/seal"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memory"
	"github.com/agent-worker/agent-worker/store/natskv"
	redisstore "github.com/agent-worker/agent-worker/store/redis"
	"github.com/agent-worker/agent-worker/tools"
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
	// seal is the deployment's sealing key (package seal).
	seal seal.Key
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

// startLeases takes the agents' leases: this replica runs, consumes and
// fires timers for the agents it holds. The replicas that share the NATS
// know each other (membership heartbeats) and divide the agents evenly;
// this one takes over the agents of a replica that dies, and hands agents
// over gracefully to one that joins (membership.go).
func (w *Worker) startLeases(st *starting) error {
	ctx, cfg, o := st.ctx, st.cfg, st.o
	w.spread.init(w, cfg, o.Log)
	s := &w.spread
	names := make([]string, 0, len(cfg.Agents))
	for _, a := range cfg.Agents {
		names = append(names, a.Name)
	}
	var err error
	w.leases, err = lease.New(names, lease.Options{Store: w.store, Clock: o.Clock, Log: o.Log, Holder: s.holder, TTL: cfg.Lease.TTL.D(),
		Assign: s.place, OnAcquire: s.acquired, OnLose: s.lost, OnDrain: s.drain, OnUndrain: s.undrain,
		OnReleased: s.released, OnOwner: s.owner,
	})
	if err != nil {
		return err
	}
	w.owner.set(w.leases) // before Start: an agent acquired is owned for its writes at once
	if err = s.startMembership(ctx, cfg, names, w.leases); err != nil {
		return fmt.Errorf("membership: %w", err)
	}
	w.leases.Start(ctx)
	o.Log.Info("leases", "holder", s.holder, "ttl", cfg.Lease.TTL.D(), "heartbeat", cfg.Lease.Heartbeat.D(),
		"replicas", s.Replicas(), "owned", len(w.leases.HeldAgents()))
	return nil
}

// startAPI starts the operator HTTP API on cfg.API.Listen.
func (w *Worker) startAPI(s *starting) error {
	cfg, o := s.cfg, s.o
	var err error
	w.api, err = api.New(api.Options{
		Listen: cfg.API.Listen, Access: w.tokens, OpenPaths: cfg.API.OpenPaths,
		Driver: w.driver, Guard: w.guard, Scheduler: w.driver.Scheduler(), Events: w.bus, EventFeed: w.eventFeed(),
		Control: w.ctl, Subagents: w.subagents, Holder: w.ctl.Holder(), Replicas: w.spread.replicas,
		Metrics: w.metrics.Handler(), Ready: w.notReady, Degraded: w.degraded, DeadLetters: w.deadLetterStore(), Log: o.Log, Clock: o.Clock,
		AlertmanagerMaxBytes: int64(cfg.API.AlertmanagerMaxBytes), MaxInflightBytes: int64(cfg.API.MaxInflightBytes), MaxMessageBytes: cfg.NATS.MaxMessageBytes,
		WakeOnResolved: wakeOnResolved(cfg), Deliver: w.deliver, Observer: w.metrics, Webhooks: webhooks(cfg),
		Reload: w.apiReload,
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	w.metrics.SetHTTPRoutes(w.api.Routes())
	w.metrics.SetWebhooks(webhookNames(cfg))
	l, err := net.Listen("tcp", cfg.API.Listen)
	if err != nil {
		return apiListenError(cfg.API.Listen, err)
	}
	w.apiAddr = l.Addr().String()
	w.apiDone = make(chan struct{})
	go func() {
		defer close(w.apiDone)
		if err := w.api.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			o.Log.Error("operator API stopped", "error", err)
		}
	}()
	return nil
}

// deliver publishes a message that arrived over HTTP to the agent's NATS
// subject, so it is durable (JetStream acknowledges it before the API
// answers 202), deduplicated by its id, and reaches whichever replica owns
// the agent. The body is api.EncodeMessage's, with m.ID as its id; its
// Nats-Msg-Id is natsbus.MsgID(agent, m.ID), because JetStream
// deduplicates Nats-Msg-Id across the whole stream and ids are per agent:
// the same id to another agent is another message. A message that came
// through the Alertmanager receiver carries the Agent-Worker-Via header,
// so the agent wakes with source alertmanager, and every message carries
// its authenticated sender (the Agent-Worker-Sender header: "api, token
// ops"), both sealed with the deployment's key. A publish JetStream
// acknowledges as a duplicate (the stream holds this agent's message with
// that id) returns api.ErrDuplicate: nothing new was queued.
func (w *Worker) deliver(ctx context.Context, agent string, m inbox.Message) error {
	subjects := natsbus.Subjects{Prefix: w.cfg.NATS.SubjectPrefix}
	subject := subjects.Inbox(agent)
	if m.Kind == inbox.Deferred {
		subject = subjects.Deferred(agent)
	}
	data, err := api.EncodeMessage(m)
	if err != nil {
		return err
	}
	msg := nats.NewMsg(subject)
	msg.Data = data
	if m.ID != "" {
		msg.Header.Set(nats.MsgIdHdr, natsbus.MsgID(agent, m.ID))
	}
	tracing.SetNATS(msg.Header, m.TraceParent)
	if m.Via != "" {
		msg.Header.Set(natsinbox.HeaderVia, m.Via)
	}
	if m.Sender != "" {
		msg.Header.Set(natsinbox.HeaderSender, m.Sender)
	}
	if m.Via != "" || m.Sender != "" {
		natsinbox.SealVia(w.seal, msg)
	}
	if w.conn.JS == nil {
		return w.conn.NC.PublishMsg(msg)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ack, err := w.conn.JS.PublishMsg(ctx, msg)
	if err != nil {
		return w.noteRefusal(err, "a message over the API to "+agent)
	}
	if ack.Duplicate {
		return fmt.Errorf("stream %s: %w", ack.Stream, api.ErrDuplicate)
	}
	return nil
}

// logAgents are the agents as the input log needs them; d supplies their
// loops (nil: none, for the upgrade, which needs only their inputs).
func logAgents(cfg *config.Config, d *driver.Driver) []natsinbox.Agent {
	out := make([]natsinbox.Agent, 0, len(cfg.Agents))
	for _, a := range cfg.Agents {
		la := natsinbox.Agent{Name: a.Name, Subscribe: a.Subscribe}
		if d != nil {
			la.Target, _ = d.Agent(a.Name)
		}
		out = append(out, la)
	}
	return out
}

// APIAddr is where the operator API listens.
func (w *Worker) APIAddr() string { return w.apiAddr }

// notReady lists why the worker cannot serve — NATS, its JetStream
// storage or the store down — from the health monitor's last probes, so
// /readyz answers at once however hung a dependency is.
func (w *Worker) notReady() []string { return w.health.Problems() }

// metricTools are the tool labels of a's tool_calls_total: its built-in
// tools and the MCP tools it is granted by name (as the model sees them);
// a "*" grant's tools are counted as "other", so the labels stay bounded
// by the config, not by what a server lists.
func metricTools(cfg *config.Config, a config.Agent) []string {
	out := slices.Clone(a.Tools)
	for _, g := range a.MCP {
		for _, t := range g.Tools {
			if t != "*" {
				out = append(out, config.ModelToolName(cfg.MCPServers[g.Server].ToolPrefix, t))
			}
		}
	}
	return out
}

// deadLetterStore is the API's dead-letter store: nil in core NATS mode.
func (w *Worker) deadLetterStore() api.DeadLetterStore {
	if w.deadLetters == nil {
		return nil
	}
	return replays{w}
}

// replays is the dead-letter store whose replays that the input stream
// refuses are noted as its other refusals are (refusal.go).
type replays struct{ w *Worker }

func (r replays) List(ctx context.Context, agent string, limit int) ([]natsinbox.DeadLetter, error) {
	return r.w.deadLetters.List(ctx, agent, limit)
}

func (r replays) Replay(ctx context.Context, agent string, seq uint64) (natsinbox.DeadLetter, error) {
	dl, err := r.w.deadLetters.Replay(ctx, agent, seq)
	if err != nil {
		err = r.w.noteRefusal(err, "a dead-letter replay to "+agent)
	}
	return dl, err
}

// degraded lists what works less well without making the worker unready:
// the MCP servers that are down (their tools answer with an error).
func (w *Worker) degraded() []string {
	var out []string
	if r := w.refusals(); r != "" {
		out = append(out, r)
	}
	if w.mcp == nil {
		return out
	}
	for _, st := range w.mcp.Down() {
		out = append(out, fmt.Sprintf("MCP server %s down since %s: %s (its tools answer with an error; reconnecting)", st.Server, st.Since.UTC().Format(time.RFC3339), st.Error))
	}
	return out
}

// Health returns the monitor of the worker's dependencies.
func (w *Worker) Health() *health.Monitor { return w.health }

// newHealth probes what a turn needs: the NATS connection, the embedded
// server's JetStream storage, and the state store.
func newHealth(conn *natsbus.Conn, st store.Store, o Options) *health.Monitor {
	return health.New(health.Options{Clock: o.Clock, Log: o.Log},
		health.Check{Name: "nats", Probe: func(context.Context) error { return conn.Ready() }},
		health.Check{Name: "jetstream_storage", Probe: func(context.Context) error { return conn.StorageErr() }},
		health.Check{Name: "store", Probe: func(ctx context.Context) error {
			if _, err := st.Get(ctx, "ready.probe"); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			return nil
		}},
	)
}

// apiTokens reads the tokens' values from their env vars or files.
func apiTokens(in []config.Token) ([]api.Token, error) {
	var out []api.Token
	for _, t := range in {
		v, err := config.ReadSecret("api.tokens "+t.Name+" value", t.ValueEnv, t.ValueFile)
		if err != nil {
			return nil, err
		}
		out = append(out, api.Token{Name: t.Name, Role: api.Role(t.Role), Value: v, Agents: t.Agents})
	}
	return out, nil
}

// loadTokens reads the tokens' values and checks them.
func loadTokens(in []config.Token) (*access.Tokens, error) {
	tokens, err := apiTokens(in)
	if err != nil {
		return nil, err
	}
	set, err := access.NewSet(tokens)
	if err != nil {
		return nil, err
	}
	return access.NewTokens(set), nil
}

// ReloadTokens re-reads the values of the operator API's tokens
// (api.tokens value_file, value_env) and swaps them in atomically with
// api.Server.SetTokens, for the API and the NATS control subject alike
// (they share one set): from its return a replaced value gets 401 and the
// new one is accepted. Names, roles and agents stay as the config the
// worker started with. On any error — a file that cannot be read, a token
// left without a value, an empty set beyond loopback — the tokens in
// force stay and nothing changes. The error never holds a token value.
func (w *Worker) ReloadTokens() error {
	if w.api == nil {
		return errors.New("the operator API is not running")
	}
	tokens, err := apiTokens(w.Config().API.Tokens)
	if err != nil {
		return err
	}
	return w.api.SetTokens(tokens)
}

// Stop shuts the worker down: writes to the API get 503; no new turns;
// running turns may finish until grace ends, then are cancelled (their
// messages stay in the log, below no cursor); then NATS and the store
// close. It undoes Start's steps, the last first (steps.go).
func (w *Worker) Stop(grace context.Context) {
	w.unwind(len(steps), grace)
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

// openStore opens the store cfg names; nats:// buckets keep replicas
// copies (nats.replicas).
func openStore(ctx context.Context, cfg config.Store, replicas int, conn *natsbus.Conn, log *slog.Logger) (store.Store, error) {
	raw := cfg.URL
	scheme, rest, _ := strings.Cut(raw, "://")
	switch scheme {
	case "memory":
		log.Warn("state store is memory://: spend, halts, pauses and history do not survive a restart")
		return memory.New(nil), nil
	case "nats":
		if conn.JS == nil {
			return nil, fmt.Errorf("%w: store.url nats:// needs JetStream (nats.jetstream: true)", ErrConfig)
		}
		return natskv.Open(ctx, conn.JS, natskv.Options{Bucket: strings.Trim(rest, "/"), Replicas: replicas, Log: log})
	case "redis", "rediss", "redis+sentinel", "rediss+sentinel", "redis+cluster", "rediss+cluster":
		tlsCfg, err := tlsConfig(cfg.TLS)
		if err != nil {
			return nil, fmt.Errorf("%w: store.tls: %w", ErrConfig, err)
		}
		s, err := redisstore.Open(ctx, raw, redisstore.Options{PasswordEnv: cfg.PasswordEnv,
			SentinelPasswordEnv: cfg.SentinelPasswordEnv, TLS: tlsCfg, Log: log})
		if err != nil {
			return nil, err
		}
		log.Info("state store is Redis", "url", Redact(raw))
		return s, nil
	}
	return nil, fmt.Errorf("%w: store.url %q: unknown scheme %q (want nats, redis, rediss, redis+sentinel, redis+cluster or memory)", ErrConfig, Redact(raw), scheme)
}

// tlsConfig builds a client TLS config from files; nil when none is set.
func tlsConfig(t config.TLS) (*tls.Config, error) {
	if t.CAFile == "" && t.CertFile == "" && t.KeyFile == "" {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file %s holds no PEM certificate", t.CAFile)
		}
	}
	if t.CertFile != "" || t.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// Redact hides a password in a URL (also in multi-host Redis URLs that
// net/url cannot parse).
func Redact(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	at := strings.LastIndex(rest, "@")
	if slash := strings.Index(rest, "/"); slash >= 0 && slash < at {
		at = strings.LastIndex(rest[:slash], "@")
	}
	if at < 0 {
		return raw
	}
	user := rest[:at]
	if name, _, hasPass := strings.Cut(user, ":"); hasPass {
		user = name + ":xxxxx"
	}
	return scheme + "://" + user + rest[at:]
}

// buildSpecs resolves each configured agent into what the driver runs,
// with its own model instance (and instances of the model's fallbacks).
func buildSpecs(ctx context.Context, cfg *config.Config, o Options, bus *events.Bus, mcp *mcptools.Servers) ([]driver.Spec, error) {
	var specs []driver.Spec
	for _, a := range cfg.Agents {
		env := models.Env{Agent: a.Name, Events: bus, Log: o.Log, Clock: o.Clock}
		// A switch builds models long after ctx (a start's, a reload's)
		// has ended.
		bctx := context.WithoutCancel(ctx)
		one := func(key string, def config.Model) (model.LLM, error) {
			if o.Models != nil {
				return o.Models(a.Name, def)
			}
			return models.New(bctx, key, def, env)
		}
		build := func(key string) (model.LLM, error) { return models.WithFallbacks(key, cfg.Models, one, env) }
		m, err := build(a.Model)
		if err != nil {
			return nil, fmt.Errorf("agent %q: %w", a.Name, err)
		}
		// An operator may switch it to any configured model (driver.ModelSwitch).
		m = models.NewSwitch(a.Model, m, cfg.Models, one, env)
		mem, err := memorySpec(cfg, a, m, build, o.Log)
		if err != nil {
			return nil, fmt.Errorf("agent %q: memory: %w", a.Name, err)
		}
		spec := driver.Spec{
			Name:                a.Name,
			Instruction:         a.Instruction,
			Model:               m,
			Tools:               a.Tools,
			Publish:             a.Publish,
			HTTPGet:             a.HTTPGet,
			HTTPGetAllowPrivate: a.HTTPGetAllowPrivate,
			Sleep:               tools.Sleep{Min: a.Sleep.Min.D(), Max: a.Sleep.Max.D()},
			Heartbeat:           a.Sleep.Default.D(),
			InboxCap:            a.Inbox.Cap,
			TurnTimeout:         a.Turn.Timeout.D(),
			Coalesce:            a.Turn.Coalesce.D(),
			MaxTurnsPerWake:     a.Turn.MaxPerWake,
			HistoryTurns:        a.Turn.HistoryTurns,
			Retry:               driver.Backoff{Base: a.Turn.Retry.Base.D(), Max: a.Turn.Retry.Max.D()},
			MaxInputBytes:       a.Turn.MaxInputBytes,
			ResumeWithin:        a.Turn.ResumeWithin.D(),
			Approval:            a.Approval,
			ApprovalTTL:         a.ApprovalTTL.D(),
			// The journal's messages are read from the log at once.
			ResumeWait:   10 * time.Second,
			TurnsPerHour: a.Limits.TurnsPerHour,
			TurnBurst:    a.Limits.TurnBurst,
			Schedules:    schedules(a.Schedules),
			Memory:       mem,
		}
		if len(a.MCP) > 0 && mcp != nil {
			spec.Toolsets = []tool.Toolset{mcp.Toolset(a.Name, a.MCP, a.Tools)}
		}
		specs = append(specs, spec)
	}
	return specs, nil
}

func schedules(in []config.Schedule) []scheduler.Schedule {
	out := make([]scheduler.Schedule, 0, len(in))
	for _, s := range in {
		out = append(out, scheduler.Schedule{
			Name: s.Name, Cron: s.Cron, Timezone: s.Timezone, Prompt: s.Prompt,
			Overlap: s.Overlap, Jitter: s.Jitter.D(), Enabled: s.Enabled == nil || *s.Enabled,
		})
	}
	return out
}

// holderName is this replica's name among the replicas (lease.holder;
// default the host name, then the pid): the owner named in agent views and
// control replies, and the lease records' holder.
func holderName(cfg *config.Config) string {
	holder := cfg.Lease.Holder
	if holder == "" {
		holder, _ = os.Hostname()
	}
	if holder == "" {
		holder = fmt.Sprintf("agent-worker-%d", os.Getpid())
	}
	return holder
}

// leaseOwner says which agents this replica owns — those whose lease it
// holds (lease.Manager.Held) — for the guard, the scheduler, the driver
// (through the scheduler) and control. Before the lease manager exists,
// and after it stopped, it owns nothing, so nothing is written. It takes
// only the lease manager's lock, never an agent's, so the guard may ask
// it while the driver holds the agent's.
type leaseOwner struct {
	m atomic.Pointer[lease.Manager]
}

func (o *leaseOwner) set(m *lease.Manager) { o.m.Store(m) }

// Owns implements guard.Owner, scheduler.Owner and control.Owner.
func (o *leaseOwner) Owns(agent string) bool {
	m := o.m.Load()
	return m != nil && m.Held(agent)
}

// Doubt implements control.Doubter: a lease held here whose renewal has
// not been confirmed in time may be another replica's by now.
func (o *leaseOwner) Doubt(agent string) string {
	if m := o.m.Load(); m != nil {
		return m.Doubt(agent)
	}
	return ""
}

// gauges reads the driver's agents for the metrics' scrape-time gauges:
// every agent's ownership, and the other per-agent gauges of the agents
// this replica owns only (metrics.AgentGauges.Standby), so that summed
// over the replicas each agent counts once.
type gauges struct{ w *Worker }

// Replicas implements metrics.ReplicaSource.
func (g gauges) Replicas() int { return g.w.spread.Replicas() }

// ReadAhead implements metrics.ReadAheadSource: the input log's window.
func (g gauges) ReadAhead() (int64, uint64, uint64, bool) {
	if g.w.binding == nil || g.w.conn.JS == nil {
		return 0, 0, 0, false
	}
	held, window, stream := g.w.binding.ReadAhead()
	return held, window, stream, true
}

// DeadLettersStored implements metrics.DeadLetterSource: the dead-letter
// stream's message count, asked within a second.
func (g gauges) DeadLettersStored() (uint64, bool) {
	if g.w.deadLetters == nil {
		return 0, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	n, err := g.w.deadLetters.Stored(ctx)
	return n, err == nil
}

// MCPServersUp implements metrics.MCPSource.
func (g gauges) MCPServersUp() map[string]bool {
	if g.w.mcp == nil {
		return nil
	}
	up := map[string]bool{}
	for _, st := range g.w.mcp.Status() {
		up[st.Server] = st.Up
	}
	return up
}

// MCPStartWaits implements metrics.MCPStartWaitSource.
func (g gauges) MCPStartWaits() map[string]map[string]uint64 {
	if g.w.mcp == nil {
		return nil
	}
	return g.w.mcp.StartWaits()
}

// LedgerWriteFailures implements metrics.LedgerSource.
func (g gauges) LedgerWriteFailures() uint64 {
	if g.w.guard == nil {
		return 0
	}
	return g.w.guard.WriteFailures()
}

// LedgersUnstored implements metrics.LedgerSource.
func (g gauges) LedgersUnstored() int {
	if g.w.guard == nil {
		return 0
	}
	return len(g.w.guard.Unstored())
}

func (g gauges) Dependencies() []metrics.Dependency {
	var out []metrics.Dependency
	for _, s := range g.w.health.Statuses() {
		out = append(out, metrics.Dependency{Name: s.Name, Up: s.Err == nil})
	}
	return out
}

func (g gauges) Gauges() []metrics.AgentGauges {
	var out []metrics.AgentGauges
	d := g.w.driver
	for _, a := range d.Agents() {
		st := a.Status()
		next := map[string]time.Time{}
		for _, s := range a.Schedules() {
			next[s] = d.Scheduler().Next(a.Name(), s)
		}
		ag := metrics.AgentGauges{Name: a.Name(), Standby: st.Standby, State: string(st.State), InboxPending: st.InboxPending + st.Deferred,
			SubagentsRunning: g.w.subagents.Running(a.Name()), NextSchedule: next, MemoryTokens: a.MemoryTokens()}
		if gs, ok := g.w.guard.Status(a.Name()); ok && !st.Standby {
			ag.Spend = []metrics.WindowSpend{{Window: "turn", Spent: gs.Turn.SpentUSD, Ceiling: gs.Turn.CeilingUSD},
				{Window: "session", Spent: gs.Session.SpentUSD, Ceiling: gs.Session.CeilingUSD},
				{Window: "day", Spent: gs.Daily.SpentUSD, Ceiling: gs.Daily.CeilingUSD}}
		}
		out = append(out, ag)
	}
	return out
}

// subagentOptions configures the subagent manager. With JetStream its
// subagents run anywhere: jobs in the work-queue stream
// <nats.stream>_SUBAGENTS that every replica with room
// (subagents.max_per_replica) takes, their reports, charges and stops
// over NATS (package background). Without, each runs in its parent's
// process.
func (w *Worker) subagentOptions(cfg *config.Config, o Options) background.Options {
	opts := background.Options{Clock: o.Clock, Log: o.Log, Events: w.bus, Charger: w.guard, Replica: holderName(cfg)}
	if w.conn.JS == nil {
		return opts
	}
	opts.MaxPerReplica = 8
	if n := cfg.Subagents.MaxPerReplica; n != nil {
		opts.MaxPerReplica = *n
	}
	opts.JetStream, opts.NATS, opts.Store = w.conn.JS, w.conn.NC, w.store
	opts.Subjects = natsbus.Subjects{Prefix: cfg.NATS.SubjectPrefix}
	opts.Stream, opts.DuplicateWindow, opts.Replicas = cfg.NATS.Stream+"_SUBAGENTS", cfg.NATS.DuplicateWindow.D(), cfg.NATS.Replicas
	// A charges consumer per parent agent, the jobs consumer, and room
	// for agents added while replicas with the older config still run.
	opts.MaxConsumers = max(serverMaxConsumers, 2*(len(cfg.Agents)+1))
	opts.AckWait, opts.ReportMaxBytes = cfg.NATS.AckWait.D(), cfg.NATS.MaxMessageBytes
	opts.Seal = w.seal
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
