package api_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// visit is one browser-like request: a cookie, extra headers, and a
// client that does not follow redirects, so a 303 is seen as it is.
type visit struct {
	method, path string
	cookie       string // the session cookie's value; "" sends none
	header       map[string]string
	form         url.Values // sent form-encoded when set
}

// browse sends v to the world's server.
func (w *world) browse(v visit) reply {
	w.t.Helper()
	return browseAt(w.t, w.ts.Client(), w.ts.URL, v)
}

func browseAt(t *testing.T, client *http.Client, base string, v visit) reply {
	t.Helper()
	var body io.Reader
	if v.form != nil {
		body = strings.NewReader(v.form.Encode())
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, v.method, base+v.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if v.form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if v.cookie != "" {
		req.AddCookie(&http.Cookie{Name: api.SessionCookie, Value: v.cookie})
	}
	for k, val := range v.header {
		req.Header.Set(k, val)
	}
	noRedirect := *client
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: data}
}

// html asks as a browser navigating does.
var html = map[string]string{"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}

// sessionCookie returns the Set-Cookie line of the session cookie in r,
// failing when there is none.
func sessionCookie(t *testing.T, r reply) (line string, c *http.Cookie) {
	t.Helper()
	for _, l := range r.header.Values("Set-Cookie") {
		if c, err := http.ParseSetCookie(l); err == nil && c.Name == api.SessionCookie {
			return l, c
		}
	}
	t.Fatalf("no %s cookie set: %v", api.SessionCookie, r.header)
	return "", nil
}

// login posts token to the login form and returns the session cookie's
// value, failing unless the login succeeded.
func (w *world) login(token string) string {
	w.t.Helper()
	r := w.browse(visit{method: http.MethodPost, path: "/login", form: url.Values{"token": {token}}, header: html})
	w.wantStatus(r, http.StatusSeeOther)
	_, c := sessionCookie(w.t, r)
	return c.Value
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf-token" content="([^"]*)">`)

// page loads the status page with a session and returns it and its
// anti-forgery token ("" when the page has none).
func (w *world) page(session string) (page, csrf string) {
	w.t.Helper()
	r := w.browse(visit{method: http.MethodGet, path: "/", cookie: session, header: html})
	w.wantStatus(r, http.StatusOK)
	page = string(r.body)
	if m := csrfMeta.FindStringSubmatch(page); m != nil {
		csrf = m[1]
	}
	return page, csrf
}

// TestLoginSetsSessionCookie: a valid token posted to the form becomes a
// session cookie (HttpOnly, SameSite=Strict, Path=/, Max-Age of the
// lifetime, Secure only over TLS) holding no token, and a 303 to the
// page, which the cookie then opens, naming the caller.
func TestLoginSetsSessionCookie(t *testing.T) {
	t.Parallel()
	obs := &observer{}
	w := newWorld(t, api.Options{Observer: obs})
	r := w.browse(visit{method: http.MethodPost, path: "/login", form: url.Values{"token": {operateToken}}, header: html})
	w.wantStatus(r, http.StatusSeeOther)
	if loc := r.header.Get("Location"); loc != "/" {
		t.Fatalf("Location %q", loc)
	}
	line, c := sessionCookie(t, r)
	for _, want := range []string{"; Path=/", "; Max-Age=43200", "; HttpOnly", "; SameSite=Strict"} {
		if !strings.Contains(line, want) {
			t.Errorf("Set-Cookie %q lacks %q", line, want)
		}
	}
	if strings.Contains(line, "Secure") {
		t.Errorf("Set-Cookie %q is Secure over plain HTTP: the browser would drop it", line)
	}
	if strings.Contains(c.Value, operateToken) || strings.Contains(line, "operate-secret") {
		t.Fatalf("the cookie holds the token: %q", line)
	}
	page, csrf := w.page(c.Value)
	if !strings.Contains(page, "signed in as ops (operate)") || !strings.Contains(page, `action="logout"`) || csrf == "" {
		t.Fatalf("page of the session lacks who is signed in, the logout or the CSRF token:\n%s", page)
	}
	wait.For(t, "the login in the log", func() bool { return strings.Contains(w.logs.String(), `msg="api login" token=ops role=operate`) })
	wait.For(t, "the login counted", func() bool {
		requests, _ := obs.take()
		return slices.Contains(requests, "POST /login 303")
	})

	// Behind a TLS-terminating proxy, and over TLS itself: Secure.
	r = w.browse(visit{method: http.MethodPost, path: "/login", form: url.Values{"token": {readToken}},
		header: map[string]string{"X-Forwarded-Proto": "https"}})
	if line, _ := sessionCookie(t, r); !strings.Contains(line, "; Secure") {
		t.Errorf("behind a TLS proxy, Set-Cookie %q is not Secure", line)
	}
	tlsServer := httptest.NewTLSServer(w.srv.Handler())
	defer tlsServer.Close()
	r = browseAt(t, tlsServer.Client(), tlsServer.URL, visit{method: http.MethodPost, path: "/login", form: url.Values{"token": {readToken}}})
	w.wantStatus(r, http.StatusSeeOther)
	if line, _ := sessionCookie(t, r); !strings.Contains(line, "; Secure") {
		t.Errorf("over TLS, Set-Cookie %q is not Secure", line)
	}
}

// TestLoginFormAndRefusals: a browser asking for the page without a
// session gets the login form (401, a password field, what roles may log
// in); an API client still gets the JSON 401. A wrong token gets the form
// again with 401 and a message, an ingest token 403; each is logged and
// counted, and no token is echoed.
func TestLoginFormAndRefusals(t *testing.T) {
	t.Parallel()
	obs := &observer{}
	w := newWorld(t, api.Options{Observer: obs, Tokens: withTokens(api.Token{Name: "am", Role: api.RoleIngest, Value: ingestToken})})

	r := w.browse(visit{method: http.MethodGet, path: "/", header: html})
	w.wantStatus(r, http.StatusUnauthorized)
	form := string(r.body)
	for _, want := range []string{`<form method="post" action="login"`, `type="password"`, `name="token"`, "cannot log in", "ingest", "12 hours"} {
		if !strings.Contains(form, want) {
			t.Errorf("login form lacks %q:\n%s", want, form)
		}
	}
	if strings.Contains(form, `data-agent=`) || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
		t.Fatalf("the form shows agents, or is not HTML (%s)", r.header.Get("Content-Type"))
	}
	w.call(http.MethodGet, "/", "", "", "").errorText(t) // not a browser: JSON

	const wrong = "wrong-token-value-1234"
	r = w.browse(visit{method: http.MethodPost, path: "/login", form: url.Values{"token": {wrong}}, header: html})
	w.wantStatus(r, http.StatusUnauthorized)
	if page := string(r.body); !strings.Contains(page, "That token is not valid") || !strings.Contains(page, `type="password"`) || strings.Contains(page, wrong) {
		t.Fatalf("wrong token: the form lacks the message or echoes the token:\n%s", page)
	}
	if len(r.header.Values("Set-Cookie")) != 0 {
		t.Fatalf("a wrong token set a cookie: %v", r.header.Values("Set-Cookie"))
	}

	r = w.browse(visit{method: http.MethodPost, path: "/login", form: url.Values{"token": {ingestToken}}, header: html})
	w.wantStatus(r, http.StatusForbidden)
	if page := string(r.body); !strings.Contains(page, `Token &#34;am&#34; has role ingest`) || strings.Contains(page, ingestToken) {
		t.Fatalf("ingest token: the form does not say why, or echoes the token:\n%s", page)
	}
	if len(r.header.Values("Set-Cookie")) != 0 {
		t.Fatalf("an ingest token got a session: %v", r.header.Values("Set-Cookie"))
	}

	// A login posted from another site's page is refused.
	r = w.browse(visit{method: http.MethodPost, path: "/login", form: url.Values{"token": {operateToken}},
		header: map[string]string{"Origin": "https://evil.example"}})
	w.wantStatus(r, http.StatusForbidden)
	if len(r.header.Values("Set-Cookie")) != 0 {
		t.Fatal("a cross-origin login set a cookie")
	}

	wait.For(t, "the refusals counted", func() bool {
		requests, _ := obs.take()
		return slices.Contains(requests, "POST /login 401") && slices.Contains(requests, "POST /login 403") && slices.Contains(requests, "GET /{$} 401")
	})
	logs := w.logs.String()
	for _, want := range []string{`msg="api login with an invalid token" status=401`, `msg="api login refused" token=am result="role ingest cannot read" status=403`} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, wrong) || strings.Contains(logs, ingestToken) || strings.Contains(logs, operateToken) {
		t.Fatalf("a token value was logged:\n%s", logs)
	}
}

// TestSessionRefusedWhenNotGenuine: a session altered in any part, past
// its expiry, or whose token was rotated or removed is refused (401, its
// cookie cleared; the form says why to a browser), while a token kept
// through a rotation keeps its sessions, and a session follows its
// token's role as a bearer token would.
func TestSessionRefusedWhenNotGenuine(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	ops, dash := w.login(operateToken), w.login(readToken)
	w.wantStatus(w.browse(visit{method: http.MethodGet, path: "/v1/agents", cookie: ops}), http.StatusOK)

	parts := strings.Split(ops, ".")
	dashParts := strings.Split(dash, ".")
	flip := func(s string) string {
		b := []byte(s)
		if b[0] == 'A' {
			b[0] = 'B'
		} else {
			b[0] = 'A'
		}
		return string(b)
	}
	tampered := map[string]string{
		"mac altered":        strings.Join([]string{parts[0], parts[1], parts[2], flip(parts[3])}, "."),
		"expiry extended":    strings.Join([]string{parts[0], parts[1], parts[2] + "0", parts[3]}, "."),
		"name swapped":       strings.Join([]string{parts[0], dashParts[1], parts[2], parts[3]}, "."),
		"read mac, ops name": strings.Join([]string{dashParts[0], parts[1], dashParts[2], dashParts[3]}, "."),
		"version altered":    "s2" + ops[2:],
		"not a session":      operateToken,
	}
	for what, c := range tampered {
		r := w.browse(visit{method: http.MethodGet, path: "/v1/agents", cookie: c})
		if r.status != http.StatusUnauthorized {
			t.Fatalf("%s: status %d, want 401: %s", what, r.status, r.body)
		}
		r.errorText(t)
	}
	r := w.browse(visit{method: http.MethodGet, path: "/", cookie: tampered["mac altered"], header: html})
	w.wantStatus(r, http.StatusUnauthorized)
	if !strings.Contains(string(r.body), "no longer valid") {
		t.Fatalf("the form does not say the session is no longer valid:\n%s", r.body)
	}
	if line, _ := sessionCookie(t, r); !strings.Contains(line, "Max-Age=0") {
		t.Fatalf("a refused session's cookie is not cleared: %q", line)
	}
	wait.For(t, "a refused session in the log", func() bool {
		return strings.Contains(w.logs.String(), `msg="api request with an invalid session" method=GET path=/v1/agents`)
	})

	// Rotation: dashboard's value changes, ops keeps its value but
	// becomes read-only.
	if err := w.srv.SetTokens([]api.Token{
		{Name: "dashboard", Role: api.RoleRead, Value: "read-secret-rotated-55aa"},
		{Name: "ops", Role: api.RoleRead, Value: operateToken},
	}); err != nil {
		t.Fatal(err)
	}
	w.wantStatus(w.browse(visit{method: http.MethodGet, path: "/v1/agents", cookie: dash}), http.StatusUnauthorized)
	w.wantStatus(w.browse(visit{method: http.MethodGet, path: "/v1/agents", cookie: ops}), http.StatusOK)
	page, _ := w.page(ops)
	if strings.Contains(page, `data-verb=`) || strings.Contains(page, "<script") || !strings.Contains(page, "signed in as ops (read)") {
		t.Fatalf("a session whose token became read-only is offered the verbs:\n%s", page)
	}

	// Expiry: genuine, but its time is up.
	w.clock.Advance(api.SessionLifetime)
	r = w.browse(visit{method: http.MethodGet, path: "/", cookie: ops, header: html})
	w.wantStatus(r, http.StatusUnauthorized)
	if !strings.Contains(string(r.body), "Your session expired") {
		t.Fatalf("an expired session's form does not say so:\n%s", r.body)
	}
	w.wantStatus(w.browse(visit{method: http.MethodGet, path: "/v1/agents", cookie: ops}), http.StatusUnauthorized)
}

// TestSessionHonoursRoleAndScope: a read session sees the page without
// verbs and is refused them (403); a session of a token scoped to al*
// sees only alpha, may pause it, and is refused beta (403); the write log
// and the paused event name the token.
func TestSessionHonoursRoleAndScope(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{Tokens: withTokens(api.Token{Name: "alpha-ops", Role: api.RoleOperate, Value: alphaOpsToken, Agents: []string{"al*"}})})
	dash := w.login(readToken)
	page, csrf := w.page(dash)
	if !strings.Contains(page, `data-agent="beta"`) || strings.Contains(page, "data-verb=") || strings.Contains(page, "<script") {
		t.Fatalf("a read session's page: verbs or script offered, or agents missing:\n%s", page)
	}
	// What a script would send, with the session's own CSRF token: the
	// role's 403, as for the bearer token.
	r := w.browse(visit{method: http.MethodPost, path: "/v1/agents/alpha/pause", cookie: dash, header: map[string]string{api.CSRFHeader: csrf}})
	w.wantStatus(r, http.StatusForbidden)
	if msg := r.errorText(t); !strings.Contains(msg, `token "dashboard" has role "read"`) {
		t.Fatalf("403 %q", msg)
	}

	scoped := w.login(alphaOpsToken)
	page, csrf = w.page(scoped)
	if !strings.Contains(page, `data-agent="alpha"`) || strings.Contains(page, `data-agent="beta"`) {
		t.Fatalf("a session scoped to al* sees other agents:\n%s", page)
	}
	if !strings.Contains(page, `data-verb="pause" data-agent="alpha"`) || !strings.Contains(page, `<script src="status.js" defer></script>`) || csrf == "" {
		t.Fatalf("an operate session's page lacks the verbs:\n%s", page)
	}
	r = w.browse(visit{method: http.MethodPost, path: "/v1/agents/beta/pause", cookie: scoped, header: map[string]string{api.CSRFHeader: csrf}})
	w.wantStatus(r, http.StatusForbidden)
	if msg := r.errorText(t); !strings.Contains(msg, `token "alpha-ops" may not act on agent "beta"`) {
		t.Fatalf("403 %q", msg)
	}
	r = w.browse(visit{method: http.MethodPost, path: "/v1/agents/alpha/pause", cookie: scoped, header: map[string]string{api.CSRFHeader: csrf}})
	w.wantStatus(r, http.StatusOK)
	if e := w.waitEvent("alpha", events.Paused); e.Data["by"] != "alpha-ops" {
		t.Fatalf("paused event names %v, want the session's token", e.Data["by"])
	}
	if st := w.agent("beta").State(); st == "paused" {
		t.Fatal("a session scoped to al* paused beta")
	}
	wait.For(t, "the write log naming the session's token", func() bool {
		return strings.Contains(w.logs.String(), `msg="api write" action=pause agent=alpha token=alpha-ops status=200`)
	})

	// The page's script is served to a session, not to a stranger.
	w.wantStatus(w.browse(visit{method: http.MethodGet, path: "/status.js", cookie: scoped}), http.StatusOK)
	w.wantStatus(w.browse(visit{method: http.MethodGet, path: "/status.js"}), http.StatusUnauthorized)
}

// TestSessionWritesNeedCSRF: a write authenticated by the session cookie
// needs the session's anti-forgery token and, when the browser names
// one, this server as its origin; otherwise 403 JSON, logged, and
// nothing happens. A bearer request is unaffected, cookie or not.
func TestSessionWritesNeedCSRF(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	ops := w.login(operateToken)
	_, csrf := w.page(ops)
	w.clock.Advance(time.Second) // a login a second later: another session
	other := w.login(operateToken)
	_, otherCSRF := w.page(other)
	if other == ops || otherCSRF == csrf || csrf == "" {
		t.Fatalf("two logins a second apart made the same session or CSRF token (%q)", csrf)
	}
	host := strings.TrimPrefix(w.ts.URL, "http://")
	for what, h := range map[string]map[string]string{
		"no CSRF token":              nil,
		"a wrong CSRF token":         {api.CSRFHeader: "AAAA" + csrf[4:]},
		"another session's token":    {api.CSRFHeader: otherCSRF},
		"not base64":                 {api.CSRFHeader: "!!!"},
		"another origin":             {api.CSRFHeader: csrf, "Origin": "https://evil.example"},
		"an opaque origin":           {api.CSRFHeader: csrf, "Origin": "null"},
		"another site as referrer":   {api.CSRFHeader: csrf, "Referer": "https://evil.example/page"},
		"the right token, elsewhere": {api.CSRFHeader: csrf, "Origin": "http://" + host + ".evil.example"},
	} {
		r := w.browse(visit{method: http.MethodPost, path: "/v1/agents/alpha/pause", cookie: ops, header: h})
		if r.status != http.StatusForbidden {
			t.Fatalf("%s: status %d, want 403: %s", what, r.status, r.body)
		}
		r.errorText(t)
	}
	if w.agent("alpha").Status().Paused {
		t.Fatal("a forged request paused alpha")
	}
	wait.For(t, "the refusal in the log", func() bool {
		return strings.Contains(w.logs.String(), `msg="api session write refused" method=POST path=/v1/agents/alpha/pause token=ops`)
	})

	r := w.browse(visit{method: http.MethodPost, path: "/v1/agents/alpha/pause", cookie: ops,
		header: map[string]string{api.CSRFHeader: csrf, "Origin": w.ts.URL, "Referer": w.ts.URL + "/"}})
	w.wantStatus(r, http.StatusOK)
	r = w.browse(visit{method: http.MethodPost, path: "/v1/agents/alpha/resume", cookie: ops, header: map[string]string{"Authorization": "Bearer " + operateToken}})
	w.wantStatus(r, http.StatusOK) // bearer: no CSRF token needed
	if w.agent("alpha").Status().Paused {
		t.Fatal("the bearer resume did not resume")
	}
}

// TestLogoutClearsCookie: POST /logout clears the cookie (same
// attributes, Max-Age=0) and sends the browser to the page, which offers
// the login again; a cross-origin logout is refused.
func TestLogoutClearsCookie(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	ops := w.login(operateToken)
	r := w.browse(visit{method: http.MethodPost, path: "/logout", cookie: ops, header: map[string]string{"Origin": "https://evil.example"}})
	w.wantStatus(r, http.StatusForbidden)
	r.errorText(t)
	if len(r.header.Values("Set-Cookie")) != 0 {
		t.Fatal("a cross-origin logout cleared the cookie")
	}
	r = w.browse(visit{method: http.MethodPost, path: "/logout", cookie: ops, header: map[string]string{"Origin": w.ts.URL}})
	w.wantStatus(r, http.StatusSeeOther)
	line, c := sessionCookie(t, r)
	if c.Value != "" || !strings.Contains(line, "Max-Age=0") || !strings.Contains(line, "HttpOnly") || !strings.Contains(line, "Path=/") {
		t.Fatalf("logout's Set-Cookie %q does not clear the cookie", line)
	}
	wait.For(t, "the logout in the log", func() bool { return strings.Contains(w.logs.String(), `msg="api logout" token=ops`) })
	// The browser, having dropped the cookie, gets the form.
	w.wantStatus(w.browse(visit{method: http.MethodGet, path: "/", header: html}), http.StatusUnauthorized)
}

// TestNoTokensNoLogin: without tokens (loopback) the page needs no login,
// offers the verbs to everyone, and there is nothing to log in to. With
// tokens and the page on an open path, it offers no verbs.
func TestNoTokensNoLogin(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{Tokens: []api.Token{}})
	r := w.browse(visit{method: http.MethodGet, path: "/", header: html})
	w.wantStatus(r, http.StatusOK)
	page := string(r.body)
	if !strings.Contains(page, `data-agent="alpha"`) || !strings.Contains(page, `data-verb="pause"`) || strings.Contains(page, "log out") || strings.Contains(page, `type="password"`) {
		t.Fatalf("the page without tokens:\n%s", page)
	}
	r = w.browse(visit{method: http.MethodPost, path: "/login", form: url.Values{"token": {"anything"}}})
	w.wantStatus(r, http.StatusNotFound)
	r.errorText(t)
	// A verb from the page needs no CSRF token: there is no session.
	w.wantStatus(w.browse(visit{method: http.MethodPost, path: "/v1/agents/alpha/pause"}), http.StatusOK)

	// With tokens but the page on an open path, its anonymous viewer is
	// offered no verbs: they would be 401.
	w = newWorld(t, api.Options{OpenPaths: []string{"/"}})
	r = w.browse(visit{method: http.MethodGet, path: "/", header: html})
	w.wantStatus(r, http.StatusOK)
	if page := string(r.body); !strings.Contains(page, `data-agent="alpha"`) || strings.Contains(page, "data-verb=") || strings.Contains(page, "<script") {
		t.Fatalf("an open page offers verbs its viewer may not use:\n%s", page)
	}
}
