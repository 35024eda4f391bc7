package tools

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/adk/tool"
	"google.golang.org/adk/tool/toolconfirmation"

	"github.com/agent-worker/agent-worker/tools/urlprefix"
)

// ctxTool is a tool.Context carrying a real context.Context, for tools
// that make requests.
type ctxTool struct {
	tool.Context
	ctx context.Context
}

func (c ctxTool) ToolConfirmation() *toolconfirmation.ToolConfirmation { return nil }
func (c ctxTool) Deadline() (time.Time, bool)                          { return c.ctx.Deadline() }
func (c ctxTool) Done() <-chan struct{}                                { return c.ctx.Done() }
func (c ctxTool) Err() error                                           { return c.ctx.Err() }
func (c ctxTool) Value(k any) any                                      { return c.ctx.Value(k) }

func TestHTTPGetReadsOnlyAllowedURLs(t *testing.T) {
	t.Parallel()
	var hits []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits = append(hits, r.Method+" "+r.URL.Path)
		switch r.URL.Path {
		case "/api/status":
			_, _ = w.Write([]byte(`{"payments": "degraded"}`))
		case "/api/big":
			_, _ = w.Write([]byte(strings.Repeat("x", maxHTTPBody+100)))
		case "/api/binary":
			_, _ = w.Write([]byte{0xff, 0xfe, 0x00})
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	// The server is on 127.0.0.1: loopback, reachable only with the opt-in.
	ts, err := Build([]string{HTTPGet}, Env{HTTPAllow: []string{srv.URL + "/api/"}, HTTPAllowPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	run := ts[0].(runnable)
	ctx := ctxTool{ctx: context.Background()}

	out, err := run.Run(ctx, map[string]any{"url": srv.URL + "/api/status"})
	if err != nil || out["status"] != float64(200) && out["status"] != 200 || !strings.Contains(out["body"].(string), "degraded") {
		t.Fatalf("allowed GET: %v, %v", out, err)
	}
	out, _ = run.Run(ctx, map[string]any{"url": srv.URL + "/api/big"})
	if out["truncated"] != true || len(out["body"].(string)) != maxHTTPBody {
		t.Fatalf("big body not capped: truncated=%v len=%d", out["truncated"], len(out["body"].(string)))
	}
	out, _ = run.Run(ctx, map[string]any{"url": srv.URL + "/api/binary"})
	if !strings.Contains(out["body"].(string), "non-text") {
		t.Fatalf("binary body: %v", out["body"])
	}
	before := len(hits)
	for _, bad := range []string{
		srv.URL + "/admin",        // outside the prefix
		"ftp://example.com/api/x", // not http
		"http://user:pw@" + srv.Listener.Addr().String() + "/api/status", // credentials
		"not a url",
	} {
		if _, err := run.Run(ctx, map[string]any{"url": bad}); err == nil {
			t.Errorf("GET %q was allowed", bad)
		}
	}
	if len(hits) != before {
		t.Fatalf("refused URLs reached the server: %v", hits[before:])
	}
}

func TestAllowedURLDoesNotMatchLookalikeHosts(t *testing.T) {
	t.Parallel()
	allow, err := urlprefix.ParsePrefixes([]string{"https://status.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	for u, want := range map[string]bool{
		"https://status.example.com":              true,
		"https://status.example.com/api":          true,
		"https://status.example.com?q=1":          true,
		"https://status.example.com.evil.net/api": false,
		"https://status.example.community":        false,
	} {
		tg, err := urlprefix.Parse(u)
		if got := err == nil && allow.Allows(tg); got != want {
			t.Errorf("allows(%q) = %v, want %v", u, got, want)
		}
	}
}

func TestHTTPGetNeedsPrefixes(t *testing.T) {
	t.Parallel()
	if _, err := Build([]string{HTTPGet}, Env{}); err == nil {
		t.Fatal("http_get built without allowed prefixes")
	}
}

// fakeResolver resolves the names it knows to fixed addresses and counts
// its look-ups.
type fakeResolver struct {
	addrs map[string][]string
	calls atomic.Int64
}

func (f *fakeResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	f.calls.Add(1)
	ss, ok := f.addrs[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []net.IPAddr
	for _, s := range ss {
		out = append(out, net.IPAddr{IP: net.ParseIP(s)})
	}
	return out, nil
}

// countingServer is an httptest server on 127.0.0.1 that counts every
// request it receives and records the last request URI.
type countingServer struct {
	*httptest.Server
	hits atomic.Int64
	last atomic.Value // string: the RequestURI of the last request
}

func newCountingServer(t *testing.T, h http.HandlerFunc) *countingServer {
	t.Helper()
	s := &countingServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.last.Store(r.RequestURI)
		if h != nil {
			h(w, r)
			return
		}
		_, _ = fmt.Fprintf(w, "you reached %s", r.URL.Path)
	}))
	t.Cleanup(s.Close)
	return s
}

// port is the server's port.
func (s *countingServer) port() string {
	_, p, _ := net.SplitHostPort(s.Listener.Addr().String())
	return p
}

func buildGet(t *testing.T, env Env) runnable {
	t.Helper()
	ts, err := Build([]string{HTTPGet}, env)
	if err != nil {
		t.Fatal(err)
	}
	return ts[0].(runnable)
}

// get runs http_get with a deadline, so a request that should have been
// refused but hangs fails the test instead of stalling it.
func get(t *testing.T, run runnable, u string) (map[string]any, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return run.Run(ctxTool{ctx: ctx}, map[string]any{"url": u})
}

// A redirect from an allowed URL to another host, or to a path outside
// the prefixes, is refused with an error naming where it led, and the
// refused server never sees a request.
func TestHTTPGetRefusesRedirectsOutsidePrefixes(t *testing.T) {
	t.Parallel()
	other := newCountingServer(t, nil)
	var outside atomic.Int64
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/to-other":
			http.Redirect(w, r, other.URL+"/api/x", http.StatusFound)
		case "/api/to-outside":
			http.Redirect(w, r, "/secret", http.StatusFound)
		case "/api/to-dots":
			w.Header().Set("Location", "/api/../secret")
			w.WriteHeader(http.StatusFound)
		case "/api/to-encoded-dots":
			w.Header().Set("Location", "/api/%2e%2e/secret")
			w.WriteHeader(http.StatusFound)
		case "/api/to-encoded-slash":
			w.Header().Set("Location", "/api%2f..%2fsecret")
			w.WriteHeader(http.StatusFound)
		case "/secret", "/api/../secret", "/api/%2e%2e/secret", "/api%2f..%2fsecret":
			outside.Add(1)
			_, _ = w.Write([]byte("the secret"))
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	})
	run := buildGet(t, Env{HTTPAllow: []string{srv.URL + "/api/"}, HTTPAllowPrivate: true})
	for from, to := range map[string]string{
		"/api/to-other":         other.URL + "/api/x",
		"/api/to-outside":       srv.URL + "/secret",
		"/api/to-dots":          srv.URL + "/secret",
		"/api/to-encoded-dots":  srv.URL + "/api/%2e%2e/secret",
		"/api/to-encoded-slash": srv.URL + "/api%2f..%2fsecret",
	} {
		out, err := get(t, run, srv.URL+from)
		if err == nil {
			t.Errorf("GET %s followed its redirect to %s: %v", from, to, out)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "redirect to "+to+" refused") {
			t.Errorf("GET %s: error %q does not name the refused redirect %s", from, msg, to)
		}
	}
	if n := other.hits.Load(); n != 0 {
		t.Errorf("the other host received %d requests", n)
	}
	if n := outside.Load(); n != 0 {
		t.Errorf("the path outside the prefix received %d requests", n)
	}
}

// A redirect that stays within the prefixes is followed, up to 5 hops.
func TestHTTPGetFollowsRedirectsWithinPrefix(t *testing.T) {
	t.Parallel()
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		var n int
		switch {
		case r.URL.Path == "/api/old":
			http.Redirect(w, r, "/api/new", http.StatusMovedPermanently)
		case r.URL.Path == "/api/new":
			_, _ = w.Write([]byte("the new page"))
		case fmtSscan(r.URL.Path, "/api/hop/%d", &n) && n > 0:
			http.Redirect(w, r, fmt.Sprintf("/api/hop/%d", n-1), http.StatusFound)
		case r.URL.Path == "/api/hop/0":
			_, _ = w.Write([]byte("landed"))
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	})
	run := buildGet(t, Env{HTTPAllow: []string{srv.URL + "/api/"}, HTTPAllowPrivate: true})
	out, err := get(t, run, srv.URL+"/api/old")
	if err != nil || out["body"] != "the new page" {
		t.Fatalf("redirect within the prefix: %v, %v", out, err)
	}
	out, err = get(t, run, srv.URL+"/api/hop/5")
	if err != nil || out["body"] != "landed" {
		t.Fatalf("5 redirects: %v, %v", out, err)
	}
	before := srv.hits.Load()
	_, err = get(t, run, srv.URL+"/api/hop/6")
	if err == nil || !strings.Contains(err.Error(), "5 redirects") {
		t.Fatalf("6 redirects: err = %v, want the hop limit", err)
	}
	if n := srv.hits.Load() - before; n != 6 {
		t.Fatalf("6 redirects: server saw %d requests, want 6 (the 7th refused unsent)", n)
	}
}

func fmtSscan(s, format string, n *int) bool {
	_, err := fmt.Sscanf(s, format, n)
	return err == nil
}

// Dot segments and percent-encoded variants cannot climb out of a prefix:
// each is refused and none reaches the server.
func TestHTTPGetRefusesPathTricks(t *testing.T) {
	t.Parallel()
	srv := newCountingServer(t, nil)
	run := buildGet(t, Env{HTTPAllow: []string{srv.URL + "/api/"}, HTTPAllowPrivate: true})
	for _, p := range []string{
		"/api/../secret",
		"/api/./../secret",
		"/api/x/../../secret",
		"/api/..",
		"/api/%2e%2e/secret",
		"/api/%2E%2E/secret",
		"/api/.%2e/secret",
		"/api/%2e./secret",
		"/api/%2E%2E%2fsecret",
		"/api/%2e%2e%2Fsecret",
		"/api%2f..%2fsecret",
		"/api%2F..%2Fsecret",
		"/api/..%2fsecret",
		"/api/..%5csecret",
		"/api/..%5Csecret",
		`/api/..\secret`,
		"/api/%252e%252e/secret",
		"/api/%25252e%25252e/secret",
		"/api/%252e%252e%252fsecret",
		"/api/x%252f..%252f..%252fsecret",
		"/api/..;/secret",
		"/api/.;x/../../secret",
	} {
		if out, err := get(t, run, srv.URL+p); err == nil {
			t.Errorf("GET %s was allowed: %v", p, out)
		}
	}
	if n := srv.hits.Load(); n != 0 {
		t.Fatalf("refused path tricks reached the server %d times (last %v)", n, srv.last.Load())
	}
}

// What is checked is what is fetched: the server receives the normalised
// URL, not the one the model wrote.
func TestHTTPGetSendsTheNormalisedURL(t *testing.T) {
	t.Parallel()
	srv := newCountingServer(t, nil)
	run := buildGet(t, Env{HTTPAllow: []string{srv.URL + "/api/"}, HTTPAllowPrivate: true})
	for in, want := range map[string]string{
		"/api/./status":          "/api/status",
		"/api/x/../status":       "/api/status",
		"/api//status":           "/api/status",
		"/api/%73tatus":          "/api/status",
		"/api/x/..":              "/api/",
		"/api/a%20b?q=1&r=%2F":   "/api/a%20b?q=1&r=%2F",
		"/api/100%25/x#fragment": "/api/100%25/x",
	} {
		if _, err := get(t, run, srv.URL+in); err != nil {
			t.Errorf("GET %s: %v", in, err)
			continue
		}
		if got := srv.last.Load(); got != want {
			t.Errorf("GET %s: server received %v, want %s", in, got, want)
		}
	}
}

// A prefix matches whole path segments: "/api" allows "/api" and "/api/x"
// but not "/apix"; "/api/" allows "/api/x" but not "/api". Host names
// match case-insensitively.
func TestHTTPGetMatchesWholePathSegments(t *testing.T) {
	t.Parallel()
	srv := newCountingServer(t, nil)
	res := &fakeResolver{addrs: map[string][]string{"internal.example": {"127.0.0.1"}}}
	base := "http://internal.example:" + srv.port()
	for prefix, cases := range map[string]map[string]bool{
		base + "/api": {
			"/api": true, "/api/": true, "/api/x": true, "/api?q=1": true,
			"/apix": false, "/api-internal": false, "/ap": false, "/": false,
		},
		base + "/api/": {
			"/api/": true, "/api/x": true, "/api/x/y": true,
			"/api": false, "/apix": false, "/api-internal/x": false,
		},
	} {
		run := buildGet(t, Env{HTTPAllow: []string{prefix}, HTTPAllowPrivate: true, HTTPResolver: res})
		for p, want := range cases {
			before := srv.hits.Load()
			_, err := get(t, run, base+p)
			if got := err == nil; got != want {
				t.Errorf("prefix %s, GET %s: allowed = %v (err %v), want %v", prefix, p, got, err, want)
			}
			if !want && srv.hits.Load() != before {
				t.Errorf("prefix %s, GET %s: refused but reached the server", prefix, p)
			}
		}
		if _, err := get(t, run, "http://INTERNAL.Example:"+srv.port()+"/api/x"); err != nil {
			t.Errorf("prefix %s: upper-case host refused: %v", prefix, err)
		}
	}
}

// A name that resolves to a loopback address is refused by default, on
// the address actually dialled, and allowed with the opt-in.
func TestHTTPGetRefusesPrivateAddressesByDefault(t *testing.T) {
	t.Parallel()
	srv := newCountingServer(t, nil)
	res := &fakeResolver{addrs: map[string][]string{"internal.example": {"127.0.0.1"}}}
	byName := "http://internal.example:" + srv.port() + "/api/"
	prefixes := []string{byName, srv.URL + "/api/"}

	run := buildGet(t, Env{HTTPAllow: prefixes, HTTPResolver: res})
	for _, u := range []string{byName + "status", srv.URL + "/api/status"} {
		_, err := get(t, run, u)
		const want = "refused: 127.0.0.1 is a loopback address; this agent may not reach private addresses"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("GET %s by default: err = %v, want %q", u, err, want)
		}
	}
	if n := srv.hits.Load(); n != 0 {
		t.Fatalf("refused loopback server received %d requests", n)
	}
	if res.calls.Load() != 1 {
		t.Fatalf("resolver called %d times, want 1", res.calls.Load())
	}

	run = buildGet(t, Env{HTTPAllow: prefixes, HTTPResolver: res, HTTPAllowPrivate: true})
	out, err := get(t, run, byName+"status")
	if err != nil || out["body"] != "you reached /api/status" {
		t.Fatalf("GET with the opt-in: %v, %v", out, err)
	}
	if srv.hits.Load() != 1 || res.calls.Load() != 2 {
		t.Fatalf("with the opt-in: %d requests, %d look-ups; want 1 and 2", srv.hits.Load(), res.calls.Load())
	}
}

// Link-local addresses (cloud metadata among them) and unspecified
// addresses stay refused with the opt-in, whether named or literal, and
// so does a name with any refused address among its answers.
func TestHTTPGetRefusesLinkLocalEvenWithOptIn(t *testing.T) {
	t.Parallel()
	srv := newCountingServer(t, nil)
	res := &fakeResolver{addrs: map[string][]string{
		"metadata.example": {"169.254.169.254"},
		"mixed.example":    {"127.0.0.1", "169.254.169.254"},
		"v6ll.example":     {"fe80::1"},
	}}
	p := srv.port()
	cases := map[string]string{
		"http://metadata.example/latest/meta-data/":     "169.254.169.254 is a link-local address",
		"http://169.254.169.254/latest/meta-data/":      "169.254.169.254 is a link-local address",
		"http://[::ffff:169.254.169.254]/latest/":       "::ffff:169.254.169.254 is a link-local address",
		"http://[::ffff:a9fe:a9fe]/latest/":             "::ffff:169.254.169.254 is a link-local address",
		"http://v6ll.example/":                          "fe80::1 is a link-local address",
		"http://[fe80::1]/":                             "fe80::1 is a link-local address",
		"http://mixed.example:" + p + "/":               "169.254.169.254 is a link-local address",
		"http://0.0.0.0:" + p + "/":                     "0.0.0.0 is an unspecified address",
		"http://[::]:" + p + "/":                        ":: is an unspecified address",
		"http://[fd00:ec2::254]/latest/meta-data/":      "fd00:ec2::254 is a cloud metadata address",
		"http://100.100.100.200/latest/meta-data/":      "100.100.100.200 is a cloud metadata address",
		"http://[64:ff9b::a9fe:a9fe]/latest/meta-data/": "64:ff9b::a9fe:a9fe is a link-local address",
	}
	var prefixes []string
	for u := range cases {
		prefixes = append(prefixes, u)
	}
	run := buildGet(t, Env{HTTPAllow: prefixes, HTTPResolver: res, HTTPAllowPrivate: true})
	for u, want := range cases {
		_, err := get(t, run, u)
		if err == nil || !strings.Contains(err.Error(), "refused: "+want) {
			t.Errorf("GET %s with the opt-in: err = %v, want %q", u, err, want)
		}
	}
	if n := srv.hits.Load(); n != 0 {
		t.Fatalf("refused addresses reached the server %d times", n)
	}
}

// IPv4-mapped IPv6 forms of loopback are loopback.
func TestHTTPGetRefusesIPv4MappedLoopback(t *testing.T) {
	t.Parallel()
	srv := newCountingServer(t, nil)
	res := &fakeResolver{addrs: map[string][]string{"mapped.example": {"::ffff:127.0.0.1"}}}
	urls := []string{
		"http://[::ffff:127.0.0.1]:" + srv.port() + "/api/x",
		"http://[::FFFF:7f00:1]:" + srv.port() + "/api/x",
		"http://mapped.example:" + srv.port() + "/api/x",
	}
	run := buildGet(t, Env{HTTPAllow: urls, HTTPResolver: res})
	for _, u := range urls {
		_, err := get(t, run, u)
		// A resolver's net.IP cannot tell ::ffff:127.0.0.1 from 127.0.0.1.
		if err == nil || !strings.Contains(err.Error(), "127.0.0.1 is a loopback address") {
			t.Errorf("GET %s: err = %v, want a loopback refusal", u, err)
		}
	}
	if n := srv.hits.Load(); n != 0 {
		t.Fatalf("IPv4-mapped loopback reached the server %d times", n)
	}
}

// A proxy from the environment is not used: the address check applies to
// the server itself, never to a proxy that would then reach anything.
// Not parallel: it sets the environment.
func TestHTTPGetIgnoresProxyEnvironment(t *testing.T) {
	proxy := newCountingServer(t, nil)
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("http_proxy", proxy.URL)
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	res := &fakeResolver{addrs: map[string][]string{"public.example": {"127.0.0.1"}}}
	run := buildGet(t, Env{HTTPAllow: []string{"http://public.example/"}, HTTPResolver: res})
	_, err := get(t, run, "http://public.example/x")
	if err == nil || !strings.Contains(err.Error(), "refused: 127.0.0.1 is a loopback address") {
		t.Errorf("GET through a proxy environment: err = %v, want the dial check on the server", err)
	}
	if n := proxy.hits.Load(); n != 0 {
		t.Fatalf("the environment's proxy received %d requests", n)
	}
}

// Prefixes go through the same normaliser; one it refuses is an error when
// the tool is built, not a silent never-match.
func TestHTTPGetRefusesInvalidPrefixes(t *testing.T) {
	t.Parallel()
	for _, p := range []string{
		"ftp://example.com/",
		"https://",
		"https://user:pw@example.com/",
		"https://example.com/api%2finternal/",
		"https://example.com/api\\x/",
		"https://example.com/api?key=1",
		"https://example.com/api#frag",
		"https://example.com:99999/",
		"https://exa mple.com/",
		"not a url",
	} {
		if _, err := Build([]string{HTTPGet}, Env{HTTPAllow: []string{p}}); err == nil {
			t.Errorf("prefix %q accepted", p)
		}
	}
}
