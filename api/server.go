package api

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agent-worker/agent-worker/access"
	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/scheduler"
)

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
	// throttle counts failed authentication per client (throttle.go).
	throttle *authThrottle

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
	s.throttle = newAuthThrottle(o.Clock, o.Log)
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

// localControl is the Control used when Options.Control is nil: this
// process owns every agent, and the views are built from its own driver,
// guard and scheduler.
func localControl(o Options) (*control.Control, error) {
	return control.New(control.Options{Driver: o.Driver, Guard: o.Guard, Scheduler: o.Scheduler, Holder: o.Holder, Log: o.Log,
		View: LocalView(ViewOptions{Driver: o.Driver, Guard: o.Guard, Scheduler: o.Scheduler, Subagents: o.Subagents, Holder: o.Holder})})
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
