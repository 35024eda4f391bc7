// Package mcptools gives agents the tools of MCP servers: one connection
// per configured server per worker, shared by the agents that use it, kept
// up with backoff (a command server is restarted when it dies), and per
// agent a tool set of the tools its grants allow, under the names the
// model sees.
//
// # Guarantees
//
//   - A call to a tool outside an agent's grants never reaches the server:
//     the agent's tool set does not hold it (ADK answers "tool not found").
//   - A call is bounded by the server's timeout, and its result by
//     max_result_bytes (clipped, and the model is told how much was cut).
//     A server error, a timeout, and a server that is down are returned
//     to the model as tool errors; the turn goes on.
//   - A command server never gets the worker's whole environment: only
//     its PATH, HOME, TMPDIR, TZ and locale, the server's env and the
//     variables its inherit_env names (see commandEnv).
//   - A server that is down never blocks the worker: Start returns at
//     once and connects in the background; Status says which servers are
//     down and why.
//   - A turn does not make its first model call while a server the agent
//     is granted is still making its first connection (at start, or
//     after a reload added or changed it): it waits until that attempt
//     ends, at most the server's timeout, so a message that arrives at
//     start can use the server's tools. After its first attempt a server
//     never holds a turn: while down, its tools answer with a tool error.
//     Each wait is logged and counted (StartWaits).
//
// It must not run turns or decide what a call may cost: the driver's
// guards see MCP calls as they see built-in ones.
package mcptools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/internal/textclip"
	"github.com/agent-worker/agent-worker/tracing"
)

// Backoff between reconnects: the first wait, doubled after each failure
// up to the last.
const (
	firstRetry = time.Second
	maxRetry   = 30 * time.Second
)

// ErrUnavailable is wrapped by the error a call to a server that is down
// returns.
var ErrUnavailable = errors.New("MCP server unavailable")

// Options configure Start.
type Options struct {
	Log *slog.Logger
	// OnState, when set, is told each time a server comes up or goes down
	// (for a metric).
	OnState func(server string, up bool)
	// Version names the worker to the servers.
	Version string
	// FirstRetry is the first wait before reconnecting (default 1s); each
	// failure doubles it, up to 30s.
	FirstRetry time.Duration
}

// Servers are the worker's MCP server connections. The set is replaced
// whole by a reload (reload.go): readers see one set or the next.
type Servers struct {
	opts    Options
	servers atomic.Pointer[map[string]*server]
	ctx     context.Context // every server's run loop ends with it
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	reload  sync.Mutex // one reload at a time
	starts  startWaits // turns' waits for first connections (startwait.go)
}

// Status is one server's state.
type Status struct {
	Server string    `json:"server"`
	Up     bool      `json:"up"`
	Tools  []string  `json:"tools,omitempty"`
	Error  string    `json:"error,omitempty"`
	Since  time.Time `json:"since"`
}

type server struct {
	name string
	cfg  config.MCPServer
	log  *slog.Logger
	opts Options
	// headers are the HTTP headers, read once at Start.
	headers http.Header
	// env is a command server's whole environment, built once at Start
	// (commandEnv).
	env []string

	mu      sync.Mutex
	session *mcp.ClientSession
	tools   []*mcp.Tool // as last listed; kept while the server is down
	version int         // bumped each time tools are listed
	err     error       // why it is down
	since   time.Time
	down    chan struct{} // closed to make the loop reconnect at once

	// stop ends this server's run loop (launch); tried is closed when its
	// first connection attempt has ended, either way.
	stop      context.CancelFunc
	tried     chan struct{}
	triedOnce sync.Once
	// calls counts the calls running on it; retired, set by a reload
	// that removed or replaced it, refuses new ones (or, with next, hands
	// them to the replacement); idle is closed once it is retired and no
	// call runs (reload.go).
	calls   int
	retired error
	next    *server
	idle    chan struct{}
}

// Start connects to every server in the background and returns at once. A
// header whose environment variable or file cannot be read is an error, as
// is an inherit_env variable the worker's environment lacks.
func Start(servers map[string]config.MCPServer, opts Options) (*Servers, error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.FirstRetry <= 0 {
		opts.FirstRetry = firstRetry
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Servers{opts: opts, ctx: ctx, cancel: cancel}
	set := map[string]*server{}
	for name, cfg := range servers {
		srv, err := newServer(name, cfg, opts)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("mcp_servers.%s: %w", name, err)
		}
		set[name] = srv
	}
	s.servers.Store(&set)
	for _, srv := range set {
		s.launch(srv)
	}
	return s, nil
}

// Close disconnects every server (stopping command servers) and waits.
func (s *Servers) Close() {
	s.reload.Lock() // no reload launches a server after this
	defer s.reload.Unlock()
	s.cancel()
	for _, srv := range s.all() {
		srv.mu.Lock()
		cs := srv.session
		srv.mu.Unlock()
		if cs != nil {
			_ = cs.Close()
		}
	}
	s.wg.Wait()
}

// Status reports every server, by name.
func (s *Servers) Status() []Status {
	set := s.all()
	out := make([]Status, 0, len(set))
	for _, name := range slices.Sorted(maps.Keys(set)) {
		out = append(out, set[name].status())
	}
	return out
}

// Down returns the servers that are down.
func (s *Servers) Down() []Status {
	var out []Status
	for _, st := range s.Status() {
		if !st.Up {
			out = append(out, st)
		}
	}
	return out
}

func (srv *server) status() Status {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	st := Status{Server: srv.name, Up: srv.session != nil, Since: srv.since}
	for _, t := range srv.tools {
		st.Tools = append(st.Tools, t.Name)
	}
	if srv.session == nil && srv.err != nil {
		st.Error = srv.err.Error()
	}
	return st
}

// newServer is server name, down until it connects, with its headers and
// environment read from the worker's.
func newServer(name string, cfg config.MCPServer, opts Options) (*server, error) {
	h, err := headers(cfg)
	if err != nil {
		return nil, err
	}
	env, err := osEnv(cfg)
	if err != nil {
		return nil, err
	}
	return &server{name: name, cfg: cfg, log: opts.Log.With("mcp_server", name), opts: opts, headers: h, env: env,
		err: errors.New("not connected yet"), since: time.Now(), tried: make(chan struct{})}, nil
}

// run keeps the server connected until ctx ends.
func (srv *server) run(ctx context.Context) {
	wait := srv.opts.FirstRetry
	for ctx.Err() == nil {
		cs, tools, err := srv.connect(ctx)
		if err != nil {
			srv.setDown(err)
			srv.triedOnce.Do(func() { close(srv.tried) })
			srv.log.Warn("MCP server unavailable; its tools answer with an error until it is back", "error", err, "retry_in", wait)
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return
			}
			wait = min(2*wait, maxRetry)
			continue
		}
		wait = srv.opts.FirstRetry
		down := srv.setUp(cs, tools)
		srv.triedOnce.Do(func() { close(srv.tried) })
		srv.log.Info("MCP server connected", "tools", len(tools))
		ended := make(chan error, 1)
		go func() { ended <- cs.Wait() }()
		var why error
		select {
		case err := <-ended:
			why = fmt.Errorf("connection ended: %v", errOr(err, "closed"))
		case <-down:
			why = srv.lastErr()
			_ = cs.Close()
		case <-ctx.Done():
			_ = cs.Close()
			return
		}
		srv.setDown(why)
		srv.log.Warn("MCP server connection lost; reconnecting", "error", why, "retry_in", wait)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return
		}
	}
}

func errOr(err error, s string) string {
	if err == nil {
		return s
	}
	return err.Error()
}

// connect opens a session and lists the tools.
func (srv *server) connect(ctx context.Context) (*mcp.ClientSession, []*mcp.Tool, error) {
	cctx, cancel := context.WithTimeout(ctx, srv.cfg.Timeout.D())
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "agent-worker", Version: srv.opts.Version}, &mcp.ClientOptions{
		// The server's tools changed: list them again, so the agents' tool
		// sets offer what it has now (from their next model call on).
		ToolListChangedHandler: func(_ context.Context, req *mcp.ToolListChangedRequest) { go srv.relist(req.Session) },
	})
	var t mcp.Transport
	if len(srv.cfg.Command) > 0 {
		// Not CommandContext: the process outlives this attempt's
		// timeout; the session's Close stops it.
		cmd := exec.Command(srv.cfg.Command[0], srv.cfg.Command[1:]...)
		cmd.Env = srv.env // never nil for a command: nil would be the worker's whole environment
		cmd.Stderr = &logWriter{log: srv.log}
		t = &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	} else {
		t = &mcp.StreamableClientTransport{Endpoint: srv.cfg.URL, MaxRetries: -1,
			// A tool call's request carries its trace context (the
			// execute_tool span), so the MCP server's trace joins the turn's.
			HTTPClient: &http.Client{Transport: headerTransport{base: tracing.Transport(http.DefaultTransport), h: srv.headers}}}
	}
	cs, err := client.Connect(cctx, t, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	var tools []*mcp.Tool
	for tl, err := range cs.Tools(cctx, nil) {
		if err != nil {
			_ = cs.Close()
			return nil, nil, fmt.Errorf("list tools: %w", err)
		}
		tools = append(tools, tl)
	}
	return cs, tools, nil
}

// relist lists the tools of session cs again, if it is still the
// server's session.
func (srv *server) relist(cs *mcp.ClientSession) {
	ctx, cancel := context.WithTimeout(context.Background(), srv.cfg.Timeout.D())
	defer cancel()
	var tools []*mcp.Tool
	for tl, err := range cs.Tools(ctx, nil) {
		if err != nil {
			srv.log.Warn("MCP server announced new tools, but listing them failed; the old list stays", "error", err)
			return
		}
		tools = append(tools, tl)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.session != cs {
		return
	}
	srv.tools = tools
	srv.version++
	srv.log.Info("MCP server's tools changed", "tools", len(tools))
}

func (srv *server) setUp(cs *mcp.ClientSession, tools []*mcp.Tool) <-chan struct{} {
	srv.mu.Lock()
	srv.session, srv.tools, srv.err, srv.since = cs, tools, nil, time.Now()
	srv.version++
	srv.down = make(chan struct{})
	down := srv.down
	srv.mu.Unlock()
	if srv.opts.OnState != nil {
		srv.opts.OnState(srv.name, true)
	}
	return down
}

func (srv *server) setDown(err error) {
	srv.mu.Lock()
	was := srv.session != nil
	srv.session, srv.err = nil, err
	if was {
		srv.since = time.Now()
	}
	srv.mu.Unlock()
	if was && srv.opts.OnState != nil {
		srv.opts.OnState(srv.name, false)
	}
}

func (srv *server) lastErr() error {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return srv.err
}

// lost marks the session as broken (a call failed on the transport) so
// the loop reconnects.
func (srv *server) lost(cs *mcp.ClientSession, err error) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.session != cs || srv.down == nil {
		return
	}
	srv.err = err
	select {
	case <-srv.down:
	default:
		close(srv.down)
	}
}

// call runs tool with args on the server, bounded by its timeout.
func (srv *server) call(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	if next, err := srv.enter(); err != nil {
		return nil, err
	} else if next != nil { // replaced by a reload: the new connection answers
		return next.call(ctx, tool, args)
	}
	defer srv.leave()
	srv.mu.Lock()
	cs, why := srv.session, srv.err
	srv.mu.Unlock()
	if cs == nil {
		return nil, fmt.Errorf("%w: %q (%v); try again later", ErrUnavailable, srv.name, why)
	}
	cctx, cancel := context.WithTimeout(ctx, srv.cfg.Timeout.D())
	defer cancel()
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	switch {
	case err != nil && errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		return nil, fmt.Errorf("MCP tool %q of server %q did not answer within %s", tool, srv.name, srv.cfg.Timeout.D())
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		srv.lost(cs, err)
		return nil, fmt.Errorf("%w: %q: %v", ErrUnavailable, srv.name, err)
	}
	text := contentText(res.Content)
	if res.IsError {
		if text == "" {
			text = "no details"
		}
		if limit := srv.cfg.MaxResultBytes; limit > 0 {
			text = textclip.Bytes(text, limit, "…")
		}
		return nil, fmt.Errorf("MCP tool %q failed: %s", tool, text)
	}
	var out any = text
	if res.StructuredContent != nil {
		out = res.StructuredContent
	}
	return clipResult(out, srv.cfg.MaxResultBytes), nil
}

// contentText joins the text parts of a result.
func contentText(cs []mcp.Content) string {
	var b strings.Builder
	for _, c := range cs {
		if t, ok := c.(*mcp.TextContent); ok {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// clipResult is {"output": out}, or, when out's JSON is above limit
// bytes, its first bytes marked with how much was cut.
func clipResult(out any, limit int) map[string]any {
	s, isText := out.(string)
	if !isText {
		raw, err := json.Marshal(out)
		if err != nil {
			return map[string]any{"output": fmt.Sprint(out)}
		}
		s = string(raw)
	}
	if limit <= 0 || len(s) <= limit {
		return map[string]any{"output": out}
	}
	return map[string]any{"output": textclip.Bytes(s, limit, "…"), "clipped": "the result was " + strconv.Itoa(len(s)) + " bytes; only its first " + strconv.Itoa(limit) + " are shown"}
}

// headers reads the server's HTTP headers from their variables and files.
func headers(cfg config.MCPServer) (http.Header, error) {
	h := http.Header{}
	for _, k := range slices.Sorted(maps.Keys(cfg.HeadersEnv)) {
		v, ok := os.LookupEnv(cfg.HeadersEnv[k])
		if !ok || v == "" {
			return nil, fmt.Errorf("headers_env.%s: environment variable %s is not set", k, cfg.HeadersEnv[k])
		}
		h.Set(k, v)
	}
	for _, k := range slices.Sorted(maps.Keys(cfg.HeadersFile)) {
		b, err := os.ReadFile(cfg.HeadersFile[k])
		if err != nil {
			return nil, fmt.Errorf("headers_file.%s: %w", k, err)
		}
		h.Set(k, strings.TrimSpace(string(b)))
	}
	return h, nil
}

type headerTransport struct {
	base http.RoundTripper
	h    http.Header
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.h) > 0 {
		r = r.Clone(r.Context())
		for k, vs := range t.h {
			r.Header[k] = vs
		}
	}
	return t.base.RoundTrip(r)
}

// logWriter sends a command server's stderr to the log, a line at a time.
type logWriter struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.log.Info("MCP server stderr", "line", textclip.Bytes(string(w.buf[:i]), 2000, "…"))
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 64<<10 { // a line without end: log what there is
		w.log.Info("MCP server stderr", "line", textclip.Bytes(string(w.buf), 2000, "…"))
		w.buf = w.buf[:0]
	}
	return len(p), nil
}

var _ io.Writer = (*logWriter)(nil)

// Check connects to one server once, as Start would, lists its tools and
// disconnects: for `agent-worker mcp check`.
func Check(ctx context.Context, name string, cfg config.MCPServer, log *slog.Logger) ([]*mcp.Tool, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	srv, err := newServer(name, cfg, Options{Log: log})
	if err != nil {
		return nil, err
	}
	cs, tools, err := srv.connect(ctx)
	if err != nil {
		return nil, err
	}
	_ = cs.Close()
	return tools, nil
}
