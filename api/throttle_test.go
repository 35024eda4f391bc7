package api_test

import (
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/api"
)

// clientFrom is an HTTP client of the world whose connections come from
// ip (any 127.0.0.0/8 address is this machine's loopback on Linux), so
// the server sees another client address.
func (w *world) clientFrom(ip string) *http.Client {
	w.t.Helper()
	tr := w.ts.Client().Transport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).DialContext
	w.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func bearer(token string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token}
}

// linesOf counts the log lines holding every one of want.
func linesOf(logs string, want ...string) int {
	n := 0
	for line := range strings.Lines(logs) {
		all := true
		for _, w := range want {
			all = all && strings.Contains(line, w)
		}
		if all {
			n++
		}
	}
	return n
}

// TestFailedAuthenticationIsThrottledPerClient: after AuthFailureLimit
// wrong credentials from one client address within AuthFailureWindow,
// that client's requests — the right token, a session, the login form —
// are answered 429 with Retry-After and not checked, until the window
// ends; then the right token gets in. Another client address is not
// affected, X-Forwarded-For changes nothing, and the open paths stay
// open. Each failure is counted by the Observer under its route.
func TestFailedAuthenticationIsThrottledPerClient(t *testing.T) {
	t.Parallel()
	obs := &observer{}
	w := newWorld(t, api.Options{Observer: obs})
	other := w.clientFrom("127.0.0.2")

	for i := range api.AuthFailureLimit {
		r := w.request(http.MethodGet, "/v1/agents", bearer("guess-"+string(rune('a'+i))), "")
		w.wantStatus(r, http.StatusUnauthorized)
	}
	throttled := func(r reply, retry string) {
		t.Helper()
		w.wantStatus(r, http.StatusTooManyRequests)
		if got := r.header.Get("Retry-After"); got != retry {
			t.Fatalf("Retry-After %q, want %q", got, retry)
		}
		if msg := r.errorText(t); !strings.Contains(msg, "127.0.0.1") || !strings.Contains(msg, "retry in") {
			t.Fatalf("429 says %q", msg)
		}
	}
	throttled(w.request(http.MethodGet, "/v1/agents", bearer(readToken), ""), "60")
	throttled(w.request(http.MethodPost, "/v1/agents/alpha/pause", bearer(operateToken), ""), "60")
	throttled(w.request(http.MethodGet, "/v1/agents", map[string]string{"Authorization": "Bearer " + readToken, "X-Forwarded-For": "127.0.0.2"}, ""), "60")
	throttled(w.request(http.MethodPost, "/login", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, url.Values{"token": {operateToken}}.Encode()), "60")
	if w.agent("alpha").Status().Paused {
		t.Fatal("a throttled request paused the agent")
	}
	w.wantStatus(w.request(http.MethodGet, "/healthz", nil, ""), http.StatusOK)

	// Another client is not throttled, and its failures are its own.
	w.wantStatus(w.requestWith(other, http.MethodGet, "/v1/agents", bearer(readToken), ""), http.StatusOK)
	w.wantStatus(w.requestWith(other, http.MethodGet, "/v1/agents/alpha", bearer("wrong"), ""), http.StatusUnauthorized)

	w.clock.Advance(api.AuthFailureWindow - time.Second)
	throttled(w.request(http.MethodGet, "/v1/agents", bearer(readToken), ""), "1")
	w.clock.Advance(time.Second)
	w.wantStatus(w.request(http.MethodGet, "/v1/agents", bearer(readToken), ""), http.StatusOK)
	// A fresh window: one wrong try is not enough to be throttled.
	w.wantStatus(w.request(http.MethodGet, "/v1/agents", bearer("wrong"), ""), http.StatusUnauthorized)
	w.wantStatus(w.request(http.MethodGet, "/v1/agents", bearer(readToken), ""), http.StatusOK)

	got := obs.authFailures()
	want := slices.Repeat([]string{"GET /v1/agents"}, api.AuthFailureLimit)
	want = append(want, "GET /v1/agents/{name}", "GET /v1/agents")
	if !slices.Equal(got, want) {
		t.Fatalf("failed authentications observed %v, want %v", got, want)
	}
}

// TestWrongLoginsAndSessionsAreThrottled: wrong tokens typed into the
// login form and forged session cookies count as failures too; once
// throttled, a browser posting the form is shown it again with 429 and
// when to retry, and the right token is not checked.
func TestWrongLoginsAndSessionsAreThrottled(t *testing.T) {
	t.Parallel()
	obs := &observer{}
	w := newWorld(t, api.Options{Observer: obs})
	for i := range api.AuthFailureLimit {
		if i%2 == 0 {
			r := w.browse(visit{method: http.MethodPost, path: "/login", form: url.Values{"token": {"guess"}}, header: html})
			w.wantStatus(r, http.StatusUnauthorized)
			continue
		}
		w.wantStatus(w.browse(visit{method: http.MethodGet, path: "/v1/agents", cookie: "s1.forged.0.mac"}), http.StatusUnauthorized)
	}
	r := w.browse(visit{method: http.MethodPost, path: "/login", form: url.Values{"token": {operateToken}}, header: html})
	w.wantStatus(r, http.StatusTooManyRequests)
	if page := string(r.body); !strings.Contains(page, "Too many failed") || !strings.Contains(page, "60 seconds") {
		t.Fatalf("the throttled login form says:\n%s", page)
	}
	if r.header.Get("Retry-After") != "60" || len(r.header.Values("Set-Cookie")) != 0 {
		t.Fatalf("throttled login: Retry-After %q, Set-Cookie %v", r.header.Get("Retry-After"), r.header.Values("Set-Cookie"))
	}
	got := obs.authFailures()
	if len(got) != api.AuthFailureLimit || got[0] != "POST /login" || got[1] != "GET /v1/agents" {
		t.Fatalf("failed authentications observed %v", got)
	}
	w.clock.Advance(api.AuthFailureWindow)
	w.wantStatus(w.browse(visit{method: http.MethodPost, path: "/login", form: url.Values{"token": {operateToken}}, header: html}), http.StatusSeeOther)
}

// TestFailedAuthenticationLogsOneLinePerClientPerMinute: a flood of
// wrong tokens from one client writes a WARN line for its first failure
// and one when it is throttled, then one a minute with the counts since
// — never a line per request — and, once the client stops, nothing more.
// Another client has lines of its own. No presented token is logged.
func TestFailedAuthenticationLogsOneLinePerClientPerMinute(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	other := w.clientFrom("127.0.0.3")
	const flood = 1000
	for i := range flood {
		r := w.request(http.MethodGet, "/v1/agents", bearer("guess-"+operateToken[:i%8]), "")
		if r.status != http.StatusUnauthorized && r.status != http.StatusTooManyRequests {
			t.Fatalf("try %d: status %d", i, r.status)
		}
	}
	w.wantStatus(w.requestWith(other, http.MethodGet, "/v1/agents", bearer("wrong"), ""), http.StatusUnauthorized)
	w.wantStatus(w.request(http.MethodGet, "/v1/agents", nil, ""), http.StatusTooManyRequests)

	// One line for the first failure, one when the client is throttled.
	local := `remote=127.0.0.1`
	if n := linesOf(w.logs.String(), local); n != 2 {
		t.Fatalf("%d log lines about 127.0.0.1 after %d refused requests, want 2:\n%s", n, flood, w.logs)
	}
	if n := linesOf(w.logs.String(), `msg="api request with an invalid token"`, "path=/v1/agents", local); n != 1 {
		t.Fatalf("the first failure is not logged as such:\n%s", w.logs)
	}
	if n := linesOf(w.logs.String(), `msg="api client throttled after failed authentications"`, "failures=10", "retry_after_seconds=60", local); n != 1 {
		t.Fatalf("the throttling is not logged:\n%s", w.logs)
	}
	if n := linesOf(w.logs.String(), "remote=127.0.0.3"); n != 1 {
		t.Fatalf("%d log lines about the other client, want 1:\n%s", n, w.logs)
	}

	w.clock.Advance(time.Minute)
	summary := []string{`msg="api authentication refused"`, local, "level=WARN",
		"failures=9", "without_credential=0", "throttled=990", "over=1m0s", "last_path=/v1/agents"}
	if n := linesOf(w.logs.String(), summary...); n != 1 {
		t.Fatalf("no summary line %v after a minute:\n%s", summary, w.logs)
	}
	if n := linesOf(w.logs.String(), local); n != 3 {
		t.Fatalf("%d lines about 127.0.0.1 after a minute, want 3:\n%s", n, w.logs)
	}
	// Quiet from then on: no line for a minute without refusals.
	w.clock.Advance(10 * time.Minute)
	if n := linesOf(w.logs.String(), local); n != 3 {
		t.Fatalf("%d lines about 127.0.0.1 once it stopped, want 3:\n%s", n, w.logs)
	}
	// A new failure much later is logged at once again.
	w.wantStatus(w.request(http.MethodGet, "/v1/agents", bearer("wrong"), ""), http.StatusUnauthorized)
	if n := linesOf(w.logs.String(), local); n != 4 {
		t.Fatalf("%d lines about 127.0.0.1 after a new failure, want 4:\n%s", n, w.logs)
	}
	if strings.Contains(w.logs.String(), "guess-") {
		t.Fatal("a presented token was logged")
	}
}
