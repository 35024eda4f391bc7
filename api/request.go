package api

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/agent-worker/agent-worker/control"
)

// retryAfter is what a write refused during shutdown is told to wait, in
// seconds: long enough for a replacement replica to come up.
const retryAfter = "5"

// isWrite reports whether a method changes something.
func isWrite(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// serveHTTP is the order every request goes through: without tokens,
// this machine's requests only (421, 403: servesLocal); authenticate
// (401, 429 for a client throttled after failures), route (404/405),
// authorise the role (403), the shutdown gate for writes (503), a
// write's Content-Type (415: jsonOrNothing), then the route's handler,
// which checks the agent against the token's agents (403) and only then
// reserves in-flight bytes for its body (503), so a caller refused
// before cannot spend them. Writes are
// logged, and so are refused reads. Every client-supplied value in a log
// line goes through logSafe. Every answer is reported to the Observer.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	began := time.Now()
	h, pattern := s.mux.Handler(r)
	sw := &statusWriter{ResponseWriter: w}
	rec := &requestRecord{action: s.table[pattern].action, route: pattern}
	r = r.WithContext(context.WithValue(r.Context(), recordKey{}, rec))
	defer s.observe(r, pattern, rec, sw, began)
	defer func() { s.inflight.release(rec.reserved) }()
	// One token set for the whole request, even while SetTokens swaps
	// it. Without tokens, this machine's requests only (local.go).
	set := s.tokens.Load()
	if set.Empty() && !s.servesLocal(sw, r) {
		return
	}
	if isSessionRoute(pattern) { // the login is the authentication (login.go)
		s.mux.ServeHTTP(sw, r)
		return
	}
	who, ok := s.authenticate(sw, r, set)
	if !ok {
		return
	}
	rec.who = who
	// A verb forwarded to another replica goes with its caller, whom the
	// owner authorises again (control.WithCaller).
	r = r.WithContext(control.WithCaller(r.Context(), who))
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
	case write && !jsonOrNothing(sw, r): // 415 (body.go)
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

// requestRecord is what the handlers need to know about a request's
// caller, and what they tell the request log.
type requestRecord struct {
	who    caller
	route  string // the pattern the request matched; "" for none
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
