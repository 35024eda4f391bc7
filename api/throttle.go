package api

import (
	"container/list"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/agent-worker/agent-worker/clock"
)

// How failed authentication is throttled (authThrottle).
const (
	// AuthFailureLimit is how many failed authentications one client
	// address may have within AuthFailureWindow; from the one that
	// reaches it until the window ends, the address is throttled.
	AuthFailureLimit = 10
	// AuthFailureWindow is the window failures are counted in. It begins
	// with a client's first failure (once the one before has ended), and
	// it is also how often at most a client's refusals are logged.
	AuthFailureWindow = time.Minute
	// maxAuthClients bounds the client addresses the throttle remembers.
	// Beyond it the one refused longest ago is forgotten (its count and
	// throttle with it), so a sender of many addresses costs a bounded
	// amount of memory: about 200 bytes an address.
	maxAuthClients = 4096
)

// refusal is what authentication refused a request for.
type refusal int

const (
	// refusedCredential: a credential was presented and did not verify
	// (a bearer token, an Authorization header of another scheme, a
	// session cookie, the login form's token). It counts towards the
	// throttle.
	refusedCredential refusal = iota
	// refusedMissing: no credential at all. Not counted: it guesses
	// nothing, and a browser asks for /favicon.ico without one.
	refusedMissing
	// refusedThrottled: the client was throttled; its credential was
	// not looked at.
	refusedThrottled
)

// authThrottle throttles failed authentication per client address and
// keeps its log lines to one a client a window.
//
// Guarantees:
//
//   - A client address (clientOf) with AuthFailureLimit failures
//     (refusedCredential) in its window is told to wait (wait > 0) until
//     the window ends, whatever it presents; then it starts again at 0.
//     The right credential gets in once the wait is over.
//   - A client's first refusal of each kind (a failed credential, none,
//     throttled) is logged at once on its own WARN line; the ones after
//     it are counted and logged together in one WARN line ("api
//     authentication refused", with the count of each kind) a window
//     after the client's first line, and then every window while they
//     go on. A window without refusals writes nothing and ends the
//     client's lines: its next refusal is logged on its own again. So a
//     flood of wrong tokens from one client writes a line or two when it
//     starts, then one a minute, whatever its rate.
//   - Memory is bounded: at most maxAuthClients addresses are remembered;
//     a client is forgotten once its window is over and its last line
//     written.
//
// Not guaranteed: clients behind one proxy share its address, so one of
// them guessing throttles them all for the rest of the window. A sender
// with more than maxAuthClients addresses (an IPv6 sender has one per
// /64) can make the throttle forget the address refused longest ago.
type authThrottle struct {
	clock clock.Clock
	log   *slog.Logger
	max   int // maxAuthClients; smaller in tests

	mu      sync.Mutex
	clients map[string]*list.Element // of *authClient, by address
	order   list.List                // least recently refused first
}

// authClient is what the throttle remembers of one client address.
type authClient struct {
	addr     string
	start    time.Time // its window's
	failures int       // refusedCredential within the window
	// timer is armed while the client's refusals are being logged: a
	// summary line is due when it fires, AuthFailureWindow after the
	// line before.
	timer clock.Timer
	// logged: a refusal of the kind was logged on its own since the
	// client's lines began; the next ones of that kind are counted in
	// pending for the summary. Cleared when a window passes without a
	// refusal.
	logged  [3]bool
	pending [3]int    // refusals since the last summary not logged on their own, by kind
	since   time.Time // when pending began counting: the client's first line or last summary
	// lastPath and lastWhy are the latest refusal's, for the next line.
	lastPath, lastWhy string
}

func newAuthThrottle(c clock.Clock, log *slog.Logger) *authThrottle {
	return &authThrottle{clock: c, log: log, max: maxAuthClients, clients: map[string]*list.Element{}}
}

// wait returns how long addr has left to wait, 0 when it is not
// throttled. A throttled request is counted for addr's next log line.
func (t *authThrottle) wait(addr, path string) time.Duration {
	t.mu.Lock()
	e, ok := t.clients[addr]
	if !ok {
		t.mu.Unlock()
		return 0
	}
	c := e.Value.(*authClient)
	left := c.start.Add(AuthFailureWindow).Sub(t.clock.Now())
	if c.failures < AuthFailureLimit || left <= 0 {
		t.mu.Unlock()
		return 0
	}
	line := t.noteLocked(e, refusedThrottled, path, "throttled: not checked", "api client throttled after failed authentications",
		[]any{"failures", c.failures, "retry_after_seconds", retryAfterSeconds(left), "path", logSafe(path)})
	t.mu.Unlock()
	line()
	return left
}

// refused records that authentication refused a request from addr for
// kind (refusedCredential or refusedMissing) on path: why says so in
// the summary line; msg and attrs are the line logged when addr has no
// log period running (its first refusal, or the first after a quiet
// window).
func (t *authThrottle) refused(addr string, kind refusal, path, why, msg string, attrs ...any) {
	t.mu.Lock()
	now := t.clock.Now()
	var dropped []func()
	e, ok := t.clients[addr]
	if !ok {
		dropped = t.makeRoomLocked()
		e = t.order.PushBack(&authClient{addr: addr})
		t.clients[addr] = e
	}
	c := e.Value.(*authClient)
	if kind == refusedCredential {
		if !now.Before(c.start.Add(AuthFailureWindow)) {
			c.start, c.failures = now, 0
		}
		c.failures++
	}
	line := t.noteLocked(e, kind, path, why, msg, attrs)
	t.mu.Unlock()
	for _, l := range dropped {
		l()
	}
	line()
}

// noteLocked notes a refusal of c's: the first of its kind since c's
// lines began returns its own line (msg, attrs) to log now, once t.mu is
// released; any other is counted for the next summary. Either way a
// summary is due a window from now if none is. Callers hold t.mu.
func (t *authThrottle) noteLocked(e *list.Element, kind refusal, path, why, msg string, attrs []any) (line func()) {
	c := e.Value.(*authClient)
	t.order.MoveToBack(e)
	c.lastPath, c.lastWhy = path, why
	if c.timer == nil {
		c.timer, c.since = t.clock.AfterFunc(AuthFailureWindow, func() { t.flush(e) }), t.clock.Now()
	}
	if c.logged[kind] {
		c.pending[kind]++
		return func() {}
	}
	c.logged[kind] = true
	return func() { t.log.Warn(msg, append(attrs, "remote", logSafe(c.addr))...) }
}

// flush is due a window after c's last line: the summary of the
// refusals counted since, and another due a window later; or, with
// none, no line, c's lines end (the next refusal of each kind is logged
// on its own again), and c is forgotten once its window is over.
func (t *authThrottle) flush(e *list.Element) {
	t.mu.Lock()
	c := e.Value.(*authClient)
	if t.clients[c.addr] != e { // forgotten (makeRoomLocked) meanwhile
		t.mu.Unlock()
		return
	}
	line := func() {}
	if c.pending != [3]int{} {
		line = t.summaryLocked(c)
		c.timer = t.clock.AfterFunc(AuthFailureWindow, func() { t.flush(e) })
	} else {
		c.timer, c.logged = nil, [3]bool{}
		if left := c.start.Add(AuthFailureWindow).Sub(t.clock.Now()); left > 0 {
			// Its failures still count: remembered to the window's end.
			c.timer = t.clock.AfterFunc(left, func() { t.flush(e) })
		} else {
			t.forgetLocked(e)
		}
	}
	t.mu.Unlock()
	line()
}

// summaryLocked returns c's summary line and clears its counts. Callers
// hold t.mu.
func (t *authThrottle) summaryLocked(c *authClient) func() {
	now := t.clock.Now()
	p, over, path, why := c.pending, now.Sub(c.since).Round(time.Second), c.lastPath, c.lastWhy
	c.pending, c.since = [3]int{}, now
	return func() {
		t.log.Warn("api authentication refused", "remote", logSafe(c.addr), "failures", p[refusedCredential],
			"without_credential", p[refusedMissing], "throttled", p[refusedThrottled], "over", over.String(),
			"last_path", logSafe(path), "last", why)
	}
}

// makeRoomLocked forgets the clients refused longest ago while the
// table is full, and returns the summary lines of their pending counts,
// to log once t.mu is released. Callers hold t.mu.
func (t *authThrottle) makeRoomLocked() (lines []func()) {
	for len(t.clients) >= t.max {
		e := t.order.Front()
		c := e.Value.(*authClient)
		if c.timer != nil {
			c.timer.Stop()
		}
		if c.pending != [3]int{} {
			lines = append(lines, t.summaryLocked(c))
		}
		t.forgetLocked(e)
	}
	return lines
}

func (t *authThrottle) forgetLocked(e *list.Element) {
	delete(t.clients, e.Value.(*authClient).addr)
	t.order.Remove(e)
}

// size is how many client addresses the throttle remembers.
func (t *authThrottle) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.clients)
}

// clientOf is the address a request's refusals are counted under: the
// connection's remote IP, never X-Forwarded-For or the like, which the
// client writes itself; an IPv6 address by its /64, which one host
// usually holds whole. A RemoteAddr that does not parse counts as itself.
func clientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if ip.To4() != nil {
		return ip.String()
	}
	return (&net.IPNet{IP: ip.Mask(net.CIDRMask(64, 128)), Mask: net.CIDRMask(64, 128)}).String()
}

// retryAfterSeconds is a wait in whole seconds, rounded up, at least 1.
func retryAfterSeconds(wait time.Duration) int {
	return max(1, int(math.Ceil(wait.Seconds())))
}

// refuseThrottled answers a request from a throttled client, without
// looking at its credential: 429 with Retry-After (the seconds left of
// its window, rounded up) and a JSON error, or, for the login form
// (form), the form again saying when to retry. It reports whether it
// answered.
func (s *Server) refuseThrottled(w http.ResponseWriter, r *http.Request, form bool) bool {
	addr := clientOf(r)
	wait := s.throttle.wait(addr, r.URL.Path)
	if wait <= 0 {
		return false
	}
	secs := retryAfterSeconds(wait)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	if form {
		record(r).result = "throttled"
		s.loginForm(w, r, http.StatusTooManyRequests, "Too many failed sign-ins from your address. Try again in "+strconv.Itoa(secs)+" seconds.")
		return true
	}
	fail(w, r, http.StatusTooManyRequests, "too many failed authentications from %s (%d within %v): retry in %ds; the credential was not checked",
		logSafe(addr), AuthFailureLimit, AuthFailureWindow, secs)
	return true
}

// authFailed records a refused authentication of r (kind: a credential
// that did not verify, or none): the Observer counts a failed credential
// under the request's route, and the throttle counts it and logs it
// (its first, then one line a window). why says what was refused, msg
// and attrs are the line for a client's first refusal.
func (s *Server) authFailed(r *http.Request, kind refusal, why, msg string, attrs ...any) {
	if kind == refusedCredential && s.o.Observer != nil {
		route := record(r).route
		if _, ours := s.table[route]; !ours {
			route = RouteOther
		}
		s.o.Observer.AuthFailure(route)
	}
	s.throttle.refused(clientOf(r), kind, r.URL.Path, why, msg, attrs...)
}
