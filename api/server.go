package api

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agent-worker/agent-worker/access"
	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/scheduler"
)

// Defaults of Options.
const (
	DefaultListen      = "127.0.0.1:8080"
	DefaultMaxBody     = config.MaxAPIBodyBytes
	DefaultDedupWindow = 10 * time.Minute
	DefaultHeartbeat   = 15 * time.Second
	// DefaultAlertmanagerMaxBytes bounds an Alertmanager payload
	// (api.alertmanager_max_bytes).
	DefaultAlertmanagerMaxBytes = 4 << 20
	// DefaultMaxMessageBytes bounds a queued message as EncodeMessage
	// writes it (nats.max_message_bytes).
	DefaultMaxMessageBytes = 64 << 10
	// DefaultMaxInflightBytes bounds the request bodies a Server holds at
	// once (api.max_inflight_bytes). 16 MiB admits four maximal
	// Alertmanager payloads (DefaultAlertmanagerMaxBytes) at once, or 256
	// maximal bodies of the other routes; a fifth large notification is
	// answered 503 and Alertmanager retries it. Not more, because a
	// notification costs about ten times its size while it is decoded and
	// rendered: 16 concurrent 3.9 MB ones took a worker from 53 MB to
	// 710 MB of resident memory without a cap, to 231 MB with this one;
	// 64 MiB would have admitted all 16.
	DefaultMaxInflightBytes = 16 << 20
	// DefaultGroupMemory is how long the state of an Alertmanager group
	// (its last notification) is remembered: as long as a handled id.
	DefaultGroupMemory = 24 * time.Hour
)

// RouteOther is the route reported to the Observer for a request no route
// matched (404, 405, a redirect to a cleaned path).
const RouteOther = "other"

// Outcomes of an Alertmanager notification, as reported to the Observer
// (agent_worker_alertmanager_notifications_total{outcome}).
const (
	// OutcomeAccepted: queued (202).
	OutcomeAccepted = "accepted"
	// OutcomeDuplicate: recognised as already queued or handled (200);
	// nothing was queued.
	OutcomeDuplicate = "duplicate"
	// OutcomeRejected: a 4xx answer (bad body, too large, unauthorized or
	// forbidden) to a request naming a configured agent.
	OutcomeRejected = "rejected"
	// OutcomeTruncated: queued with alerts left out to fit one message;
	// counted in addition to OutcomeAccepted.
	OutcomeTruncated = "truncated"
)

// Observer is told about requests, for metrics; metrics.Metrics is one.
// Its methods are called once a request is answered and must not block.
type Observer interface {
	// HTTPRequest reports one answered request: route is the pattern that
	// matched ("POST /v1/alertmanager/{name}", one of Server.Routes) or
	// RouteOther; code is the status; elapsed runs from the request's
	// arrival to the end of its answer (of the stream, for event streams).
	HTTPRequest(route string, code int, elapsed time.Duration)
	// AlertmanagerNotification reports the outcome of one request to the
	// Alertmanager receiver naming a configured agent; 5xx answers
	// (shutdown, NATS down, api.max_inflight_bytes: Alertmanager retries)
	// are not reported.
	AlertmanagerNotification(agent, outcome string)
	// WebhookNotification reports the outcome of one request to a
	// configured webhook (POST /v1/webhooks/{name}): the Alertmanager
	// receiver's outcomes and OutcomeTemplateError; 5xx answers are not
	// reported.
	WebhookNotification(webhook, outcome string)
}

// retryAfter is what a write refused during shutdown is told to wait, in
// seconds: long enough for a replacement replica to come up.
const retryAfter = "5"

// Errors New, Serve and SetTokens return.
var (
	// ErrNoToken: the API would listen beyond loopback without a token.
	ErrNoToken = errors.New("refusing to serve the operator API beyond loopback without a token")
	// ErrBadToken: a configured token is unusable (no value, unknown
	// role, a bad agent glob); it is access.ErrBadToken.
	ErrBadToken = access.ErrBadToken
)

// Role is what a token may do (access.Role); the package documentation
// has the table of which role each route needs.
type Role = access.Role

// Roles. Operate includes read and ingest; read and ingest share nothing.
const (
	// RoleRead may use the GET routes only.
	RoleRead = access.RoleRead
	// RoleIngest may only queue messages: POST
	// /v1/agents/{name}/messages and POST /v1/alertmanager/{name}. It
	// cannot read, so a leaked webhook token shows nothing.
	RoleIngest = access.RoleIngest
	// RoleOperate may use every route.
	RoleOperate = access.RoleOperate
)

// Token is one bearer token (access.Token). Name appears in logs and
// error messages; Value never does. Agents limits the token to these
// agents: names, or path.Match globs such as "payments-*"; empty: every
// agent. A request that names an agent outside them is answered 403, and
// lists and event streams leave such agents out.
type Token = access.Token

// Options configure a Server. Zero values take the documented defaults.
type Options struct {
	// Listen is the address ListenAndServe listens on; default
	// DefaultListen. Without Tokens it must be loopback (127.0.0.0/8, ::1
	// or "localhost").
	Listen string
	// Tokens are the accepted bearer tokens; SetTokens replaces them
	// while the server runs. None: every request is accepted, which New
	// allows on loopback only.
	Tokens []Token
	// Access, when set, holds the accepted tokens instead of Tokens (which
	// must then be empty): the server authenticates against the set it
	// holds, and SetTokens replaces that set, so every transport given
	// the same Access (the NATS control subject: control.Options.Tokens)
	// sees a rotation at once.
	Access *access.Tokens
	// OpenPaths are served without a token (exact paths). nil means
	// /healthz, /readyz and /metrics; an empty non-nil slice means none.
	OpenPaths []string
	// Driver is required.
	Driver *driver.Driver
	// Guard serves guardrail status and resets; nil: agents show no
	// spend and resets answer 404.
	Guard *guard.Guard
	// Scheduler fires schedules on request; default Driver.Scheduler().
	Scheduler *scheduler.Scheduler
	// Events feeds the event streams; default Driver.Events().
	Events *events.Bus
	// EventFeed, when set, is what the event streams read instead of
	// Events' ring: the worker's durable events stream in JetStream mode
	// (every replica's events, ids that survive restarts).
	EventFeed EventFeed
	// Metrics is served at /metrics; nil answers 404.
	Metrics http.Handler
	// Ready returns why the worker is not ready (NATS down, store
	// unreachable); empty or nil means ready.
	Ready func() []string
	// Degraded returns what works less well without making the worker
	// unready (an MCP server down: its tools answer with an error); /readyz
	// lists it with a 200.
	Degraded func() []string
	// DeadLetters serves GET /v1/agents/{name}/dlq and replay; nil
	// (core NATS mode): they answer 404, dead letters are not kept.
	DeadLetters DeadLetterStore
	Log         *slog.Logger // default: discard
	Clock       clock.Clock  // default: clock.Real()
	// MaxBody caps request bodies (413 beyond) except an Alertmanager
	// payload's; default DefaultMaxBody.
	MaxBody int64
	// AlertmanagerMaxBytes caps an Alertmanager payload (413 beyond,
	// api.alertmanager_max_bytes); default DefaultAlertmanagerMaxBytes.
	AlertmanagerMaxBytes int64
	// MaxInflightBytes caps the request bodies this Server holds at once
	// (api.max_inflight_bytes); default DefaultMaxInflightBytes. New
	// refuses one below MaxBody or AlertmanagerMaxBytes, which no single
	// request of that size could then pass.
	MaxInflightBytes int64
	// MaxMessageBytes caps a queued message as EncodeMessage writes it
	// (nats.max_message_bytes: what Deliver publishes must pass the NATS
	// binding's limit): a message over it is answered 413, and an
	// Alertmanager notification is rendered with as many alerts as fit.
	// Default DefaultMaxMessageBytes.
	MaxMessageBytes int
	// DedupWindow is how long a message or Alertmanager notification id
	// is remembered per agent; default DefaultDedupWindow.
	DedupWindow time.Duration
	// Heartbeat is the interval of the comment lines that keep event
	// streams alive through proxies; default DefaultHeartbeat.
	Heartbeat time.Duration
	// ResolvedWakes makes an all-resolved Alertmanager notification wake
	// every agent; by default it is deferred to the next turn.
	ResolvedWakes bool
	// WakeOnResolved names the agents an all-resolved Alertmanager
	// notification wakes (agents[].wake_on_resolved), besides
	// ResolvedWakes. SetWebhooks replaces it.
	WakeOnResolved map[string]bool
	// Deliver, when set, queues messages that arrive over HTTP (messages,
	// Alertmanager) — for example by publishing them to the agent's NATS
	// subject, so they are durable and reach whichever replica owns the
	// agent. Nil: straight into the agent's inbox in this process. It
	// returns an error wrapping ErrDuplicate when the transport already
	// holds a message with m.ID (JetStream's duplicate window): the
	// request is answered duplicate, not 503.
	Deliver func(ctx context.Context, agent string, m inbox.Message) error
	// Observer, when set, is told about every request (metrics).
	Observer Observer
	// Webhooks are the generic webhooks by name (webhooks.<name>),
	// served at POST /v1/webhooks/{name} (webhooks.go). New refuses one
	// whose agent the driver lacks or whose templates do not parse.
	// SetWebhooks replaces them.
	Webhooks map[string]Webhook
	// Control carries the operator verbs and the agent views to each
	// agent's owner (control.Control.Do): the worker's forwards them over
	// NATS to whichever replica owns the agent, so every replica answers
	// with the owner's result, and 503 when no owner answers. Nil: a
	// local one over Driver, Guard and Scheduler in which this process
	// owns every agent.
	Control *control.Control
	// Subagents is the subagent manager (background.Manager). Its
	// Running counts each agent's subagents in the views this server
	// builds itself (Control nil; the worker hands it to its Control's
	// view, LocalView, instead, so the count is the owner's); when it
	// also implements Subagents it serves the subagent routes. Nil: 0,
	// and the subagent routes answer 404.
	Subagents SubagentCounter
	// Holder names this replica (lease.holder): served_by in every view,
	// and the owner in the views it builds itself.
	Holder string
	// Replicas lists the live replicas, this one first (GET
	// /v1/replicas). Nil: this replica alone, owning the agents its
	// driver does not hold in standby.
	Replicas func() []Replica
	// Reload serves POST /v1/reload (reload.go). Nil: 501.
	Reload Reloader
}

// ErrDuplicate is what Options.Deliver wraps when the transport recognised
// the message as one it already holds (JetStream's PubAck.Duplicate).
var ErrDuplicate = errors.New("a message with this id is already queued")

// Server is the operator HTTP API. Its handler is safe for concurrent use.
type Server struct {
	o       Options
	driver  *driver.Driver
	ctl     *control.Control
	guard   *guard.Guard
	sched   *scheduler.Scheduler
	bus     *events.Bus
	log     *slog.Logger
	clock   clock.Clock
	tokens  *access.Tokens // its set is replaced whole by SetTokens
	open    map[string]bool
	mux     *http.ServeMux
	table   map[string]route // route pattern → its route (routes)
	seen    *idWindow
	groups  *groupWindow
	routing atomic.Pointer[webhookTable] // Options.Webhooks, parsed; replaced by SetWebhooks
	page    *template.Template

	// inflight is the budget of request body bytes held at once.
	inflight *inflight

	draining  atomic.Bool
	closing   chan struct{} // closed by Shutdown: event streams end
	closeOnce sync.Once

	// mu guards srv, addr and exposed, and orders SetTokens against
	// Serve and other SetTokens calls.
	mu      sync.Mutex
	srv     *http.Server
	addr    string
	exposed bool // Serve listens on TCP beyond loopback
}

// New checks o and builds the server; nothing listens until Serve or
// ListenAndServe. It refuses a Listen beyond loopback when no token is
// configured (ErrNoToken), and tokens without a value, with an unknown
// role or with an agent glob path.Match rejects (ErrBadToken).
func New(o Options) (*Server, error) {
	if o.Driver == nil {
		return nil, errors.New("api: a driver is required")
	}
	o, err := withDefaults(o)
	if err != nil {
		return nil, err
	}
	tokens, err := tokenStore(o)
	if err != nil {
		return nil, err
	}
	page, err := parsePage()
	if err != nil {
		return nil, fmt.Errorf("api: status page template: %w", err)
	}
	ctl := o.Control
	if ctl == nil {
		ctl, err = localControl(o)
		if err != nil {
			return nil, fmt.Errorf("api: %w", err)
		}
	}
	s := &Server{
		o: o, driver: o.Driver, ctl: ctl, guard: o.Guard, sched: o.Scheduler, bus: o.Events,
		log: o.Log, clock: o.Clock, open: map[string]bool{},
		mux: http.NewServeMux(), table: map[string]route{}, tokens: tokens,
		seen:    newIDWindow(o.Clock, o.DedupWindow, maxRemembered),
		groups:  newGroupWindow(o.Clock, DefaultGroupMemory, maxRemembered),
		page:    page,
		closing: make(chan struct{}),
	}
	s.inflight = &inflight{limit: o.MaxInflightBytes}
	table, err := s.newWebhookTable(o.Webhooks, o.WakeOnResolved)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	s.routing.Store(table)
	for _, p := range o.OpenPaths {
		s.open[p] = true
	}
	s.register(s.routes())
	return s, nil
}

// withDefaults fills o's zero values with the documented defaults (o has
// a Driver). It refuses a MaxInflightBytes below the largest body a
// request may carry, because such a request could never be admitted and
// would be answered 503 forever.
func withDefaults(o Options) (Options, error) {
	if o.Listen == "" {
		o.Listen = DefaultListen
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.Scheduler == nil {
		o.Scheduler = o.Driver.Scheduler()
	}
	if o.Events == nil {
		o.Events = o.Driver.Events()
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.AlertmanagerMaxBytes <= 0 {
		o.AlertmanagerMaxBytes = DefaultAlertmanagerMaxBytes
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if o.MaxInflightBytes <= 0 {
		o.MaxInflightBytes = DefaultMaxInflightBytes
	}
	if largest := max(o.MaxBody, o.AlertmanagerMaxBytes); o.MaxInflightBytes < largest {
		return o, fmt.Errorf("api: api.max_inflight_bytes %d is below the largest request body the API takes (%d): no request of that size could ever be admitted", o.MaxInflightBytes, largest)
	}
	if o.DedupWindow <= 0 {
		o.DedupWindow = DefaultDedupWindow
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.OpenPaths == nil {
		o.OpenPaths = []string{"/healthz", "/readyz", "/metrics"}
	}
	return o, nil
}

// tokenStore is the token store the server authenticates against:
// Options.Access when shared with other transports, else one holding
// Options.Tokens. It enforces the no-token rule: without a token the API
// must not be reachable beyond loopback, where anyone could drive it.
func tokenStore(o Options) (*access.Tokens, error) {
	tokens := o.Access
	if tokens == nil {
		set, err := access.NewSet(o.Tokens)
		if err != nil {
			return nil, err
		}
		tokens = access.NewTokens(set)
	} else if len(o.Tokens) > 0 {
		return nil, errors.New("api: set Options.Tokens or Options.Access, not both")
	}
	if tokens.Load().Empty() && !config.IsLoopback(o.Listen) {
		return nil, fmt.Errorf("%w: api.listen %q is reachable beyond loopback and api.tokens is empty; add a token to api.tokens (role read, ingest or operate) or set api.listen to a loopback address such as 127.0.0.1:8080", ErrNoToken, o.Listen)
	}
	return tokens, nil
}

// localControl is the Control used when Options.Control is nil: this
// process owns every agent, and the views are built from its own driver,
// guard and scheduler.
func localControl(o Options) (*control.Control, error) {
	return control.New(control.Options{Driver: o.Driver, Guard: o.Guard, Scheduler: o.Scheduler, Holder: o.Holder, Log: o.Log,
		View: LocalView(ViewOptions{Driver: o.Driver, Guard: o.Guard, Scheduler: o.Scheduler, Subagents: o.Subagents, Holder: o.Holder})})
}

// SetTokens replaces the accepted tokens while the server runs (for
// rotation), checked as New checks them. On error the tokens in force
// stay. Guarantees:
//
//   - The swap is atomic: each request is authenticated against the old
//     set or the new one, never a mix, so a token present in both is never
//     refused during the swap.
//   - Once SetTokens returns, a token no longer in the set gets 401; a
//     request it authenticated before the swap finishes as it began.
//   - Event streams opened with a token that the new set no longer holds
//     with the same name, role and agents end (as do streams opened
//     without a token when the new set has tokens).
//   - The no-token rule of New holds: an empty set is refused with
//     ErrNoToken while the server listens, or would listen
//     (Options.Listen), beyond loopback.
//
// It is safe to call concurrently with requests, Serve and itself.
func (s *Server) SetTokens(tokens []Token) error {
	set, err := access.NewSet(tokens)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if set.Empty() {
		if s.srv != nil && s.exposed {
			return fmt.Errorf("%w: the API listens on %s, beyond loopback; keeping the current tokens", ErrNoToken, s.addr)
		}
		if s.srv == nil && !config.IsLoopback(s.o.Listen) {
			return fmt.Errorf("%w: api.listen %q is reachable beyond loopback; keeping the current tokens", ErrNoToken, s.o.Listen)
		}
	}
	s.tokens.Replace(set)
	return nil
}

// route is one endpoint of the API, the one place that says what it
// needs: authorise reads need, the write log action, Routes and the
// Observer the pattern. Every endpoint is registered from a route, so no
// handler can be reachable without a need.
type route struct {
	pattern string      // "METHOD /path", as http.ServeMux takes it
	need    access.Need // the roles that may use it (403 for others)
	action  string      // a write's name in the write log; "" for reads
	handler http.HandlerFunc
}

// readRoute is a route any role that may read may use.
func readRoute(pattern string, h http.HandlerFunc) route {
	return route{pattern: pattern, need: access.Read, handler: h}
}

// writeRoute is a route that changes something: it has an action name
// for the write log and needs need (operate, or ingest for the routes
// that only queue messages).
func writeRoute(pattern, action string, need access.Need, h http.HandlerFunc) route {
	return route{pattern: pattern, need: need, action: action, handler: h}
}

// verbRoute is pattern ("METHOD /path"), served by h through the control
// verb verb: the route needs what the verb needs over NATS
// (control.Need), from the one table of it. A write route has an action
// name for the write log.
func verbRoute(pattern, action, verb string, h http.HandlerFunc) route {
	return route{pattern: pattern, need: control.Need(verb), action: action, handler: h}
}

// routes lists every endpoint. Queueing a message (messages, the
// Alertmanager receiver, webhooks) is all an ingest token may do.
func (s *Server) routes() []route {
	rs := []route{
		readRoute("GET /healthz", s.healthz),
		readRoute("GET /readyz", s.readyz),
		readRoute("GET /metrics", s.metrics),
		readRoute("GET /{$}", s.statusPage),
		readRoute("GET /v1/replicas", s.listReplicas),
		readRoute("GET /v1/agents", s.listAgents),
		verbRoute("GET /v1/agents/{name}", "", control.VerbView, s.getAgent),
		readRoute("GET /v1/agents/{name}/events", s.agentEvents),
		readRoute("GET /v1/events", s.allEvents),
		writeRoute("POST /v1/agents/{name}/messages", "message", access.Ingest, s.postMessage),
	}
	for _, verb := range []string{control.VerbWake, control.VerbPause, control.VerbResume, control.VerbInterrupt} {
		rs = append(rs, verbRoute("POST /v1/agents/{name}/"+verb, verb, verb, s.verb(verb)))
	}
	rs = append(rs,
		verbRoute("POST /v1/agents/{name}/guardrails/reset", "guardrail-reset", control.VerbReset, s.resetGuardrail),
		verbRoute("POST /v1/agents/{name}/schedules/{schedule}/run", "schedule-run", control.VerbRunSchedule, s.runSchedule),
		readRoute("GET /v1/agents/{name}/subagents", s.listSubagents),
		readRoute("GET /v1/agents/{name}/turns", s.listTurns),
		verbRoute("GET /v1/agents/{name}/messages/{id}", "", control.VerbMessage, s.getMessage),
		verbRoute("GET /v1/agents/{name}/inbox", "", control.VerbInbox, s.listInbox),
		writeRoute("POST /v1/agents/{name}/subagents/{id}/stop", "subagent-stop", access.Operate, s.stopSubagent),
		writeRoute(alertmanagerRoute, "alertmanager", access.Ingest, s.postAlertmanager),
		writeRoute("POST /v1/reload", "reload", access.Operate, s.reload), // reload.go
		writeRoute(webhookRoute, "webhook", access.Ingest, s.postWebhook),
		s.askRoute(), // ask.go
		s.modelRoute(),
		s.scriptRoute(),
	)
	rs = append(rs, s.memoryRoutes()...)
	rs = append(rs, s.approvalRoutes()...)
	rs = append(rs, s.deadLetterRoutes()...)
	rs = append(rs, s.sessionRoutes()...)
	return rs
}

// register serves each route on the mux and records it in the table
// the middleware reads (authorise, the write log, Routes, observe).
func (s *Server) register(rs []route) {
	for _, rt := range rs {
		s.mux.HandleFunc(rt.pattern, rt.handler)
		s.table[rt.pattern] = rt
	}
}

// alertmanagerRoute is the receiver's route pattern.
const alertmanagerRoute = "POST /v1/alertmanager/{name}"

// Routes returns the route patterns ("GET /v1/agents/{name}", "POST
// /v1/alertmanager/{name}", ...), sorted: the route values the Observer
// is told besides RouteOther.
func (s *Server) Routes() []string {
	return slices.Sorted(maps.Keys(s.table))
}

// Handler returns the API's handler: authentication, routing, the
// shutdown gate and the write log around the routes.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

// ListenAndServe listens on Options.Listen and serves until Shutdown; it
// then returns http.ErrServerClosed.
func (s *Server) ListenAndServe() error {
	l, err := net.Listen("tcp", s.o.Listen)
	if err != nil {
		return fmt.Errorf("api: listen on %s (api.listen): %w", s.o.Listen, err)
	}
	return s.Serve(l)
}

// Serve serves on l until Shutdown; it then returns http.ErrServerClosed
// (at once if Shutdown came first). Like New, it refuses a TCP listener
// beyond loopback when no token is configured. It closes l.
func (s *Server) Serve(l net.Listener) error {
	tcp, isTCP := l.Addr().(*net.TCPAddr)
	exposed := isTCP && !tcp.IP.IsLoopback()
	s.mu.Lock()
	if exposed && s.tokens.Load().Empty() {
		s.mu.Unlock()
		l.Close()
		return fmt.Errorf("%w: api.listen %s is reachable beyond loopback and api.tokens is empty", ErrNoToken, tcp)
	}
	if s.srv != nil {
		s.mu.Unlock()
		l.Close()
		return errors.New("api: already serving")
	}
	s.exposed = exposed
	s.srv = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		// No WriteTimeout: event streams stay open.
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.addr = l.Addr().String()
	srv := s.srv
	s.mu.Unlock()
	if s.draining.Load() {
		l.Close()
		return http.ErrServerClosed
	}
	return srv.Serve(l)
}

// Addr returns the address the server listens on, once Serve was called
// ("" before).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Shutdown stops the server gracefully. From the moment it is called,
// writes are answered 503 with Retry-After, /readyz reports "shutting
// down" and event streams end; requests already running may finish until
// ctx ends. It returns ctx's error if they did not.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	s.closeOnce.Do(func() { close(s.closing) })
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	return srv.Shutdown(ctx)
}

// isWrite reports whether a method changes something.
func isWrite(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// serveHTTP is the order every request goes through: authenticate (401),
// route (404/405), authorise the role (403), the shutdown gate for writes
// (503), then the route's handler, which checks the agent against the
// token's agents (403) and only then reserves in-flight bytes for its
// body (503), so a caller refused before cannot spend them. Writes are
// logged, and so are refused reads. Every client-supplied value in a log
// line goes through logSafe. Every answer is reported to the Observer.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	began := time.Now()
	h, pattern := s.mux.Handler(r)
	sw := &statusWriter{ResponseWriter: w}
	rec := &requestRecord{action: s.table[pattern].action}
	r = r.WithContext(context.WithValue(r.Context(), recordKey{}, rec))
	defer s.observe(r, pattern, rec, sw, began)
	defer func() { s.inflight.release(rec.reserved) }()
	if isSessionRoute(pattern) { // the login is the authentication (login.go)
		s.mux.ServeHTTP(sw, r)
		return
	}
	who, ok := s.authenticate(sw, r)
	if !ok {
		return
	}
	rec.who = who
	if pattern == "" {
		serveMiss(sw, r, h)
		return
	}
	write := isWrite(r.Method)
	switch {
	case !s.authorise(sw, r, who, pattern):
	case write && s.draining.Load():
		sw.Header().Set("Retry-After", retryAfter)
		fail(sw, r, http.StatusServiceUnavailable, "the worker is shutting down; retry against another replica or after it restarts")
	default:
		s.mux.ServeHTTP(sw, r)
	}
	status := sw.code()
	switch {
	case write:
		level := slog.LevelInfo
		if status >= 500 {
			level = slog.LevelWarn
		}
		s.log.Log(r.Context(), level, "api write", "action", rec.action, "agent", logSafe(rec.agent), "token", logSafe(who.Name),
			"status", status, "result", logSafe(rec.result), "remote", logSafe(r.RemoteAddr))
	case status == http.StatusForbidden:
		s.log.Warn("api read refused", "method", logSafe(r.Method), "path", logSafe(r.URL.Path), "agent", logSafe(rec.agent),
			"token", logSafe(who.Name), "result", logSafe(rec.result), "remote", logSafe(r.RemoteAddr))
	}
}

// observe reports an answered request to the Observer: its route and
// status and, for the Alertmanager receiver naming a configured agent,
// the notification's outcome. Route and agent labels stay bounded: a
// route is a pattern of ours or RouteOther, an agent a configured one.
func (s *Server) observe(r *http.Request, pattern string, rec *requestRecord, sw *statusWriter, began time.Time) {
	obs := s.o.Observer
	if obs == nil {
		return
	}
	status := sw.code()
	route := pattern
	if _, ours := s.table[pattern]; !ours {
		route = RouteOther
	}
	obs.HTTPRequest(route, status, time.Since(began))
	if route == webhookRoute {
		s.observeWebhook(obs, r, rec, status)
		return
	}
	if route != alertmanagerRoute {
		return
	}
	name, _ := strings.CutPrefix(r.URL.Path, "/v1/alertmanager/")
	if _, err := s.driver.Agent(name); err != nil {
		return // an unknown agent: its name is the client's, not ours
	}
	for _, o := range outcomes(status, rec.truncated) {
		obs.AlertmanagerNotification(name, o)
	}
}

// requestRecord is what the handlers need to know about a request's
// caller, and what they tell the request log.
type requestRecord struct {
	who    caller
	action string
	agent  string
	result string
	// truncated counts the alerts an accepted Alertmanager notification
	// left out.
	truncated int
	// webhooks is the webhook table a request to a generic webhook was
	// served by (nil until its handler ran).
	webhooks *webhookTable
	// reserved is the in-flight bytes its body holds (reserveBody),
	// given back when the request ends.
	reserved int64
	// session is the session cookie that authenticated the request; ""
	// for a bearer token or none (session.go).
	session string
}

type recordKey struct{}

// record returns the request's record. Outside serveHTTP (never, in
// practice: the handlers are reachable only through it) it is a blank one
// whose zero caller may see no agent.
func record(r *http.Request) *requestRecord {
	if rec, ok := r.Context().Value(recordKey{}).(*requestRecord); ok {
		return rec
	}
	return &requestRecord{}
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// code is the status written, 200 when none was (net/http's default).
func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// serveMiss answers a request no route matched. The mux's own answer is
// plain text; 404 and 405 become JSON errors (keeping Allow), anything
// else (a redirect to the cleaned path) passes through.
func serveMiss(w http.ResponseWriter, r *http.Request, h http.Handler) {
	rec := &missRecorder{header: http.Header{}}
	h.ServeHTTP(rec, r)
	switch rec.status {
	case http.StatusNotFound:
		fail(w, r, http.StatusNotFound, "no route %s %s", r.Method, r.URL.Path)
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", rec.header.Get("Allow"))
		fail(w, r, http.StatusMethodNotAllowed, "method %s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, rec.header.Get("Allow"))
	default:
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		w.WriteHeader(rec.status)
		_, _ = w.Write(rec.body)
	}
}

// missRecorder captures the mux's answer to an unmatched request.
type missRecorder struct {
	header http.Header
	status int
	body   []byte
}

func (m *missRecorder) Header() http.Header { return m.header }

func (m *missRecorder) WriteHeader(code int) {
	if m.status == 0 {
		m.status = code
	}
}

func (m *missRecorder) Write(p []byte) (int, error) {
	if m.status == 0 {
		m.status = http.StatusOK
	}
	m.body = append(m.body, p...)
	return len(p), nil
}
