package api_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// origin is the world's own origin, as its status page's script sends it.
func (w *world) origin() string { return w.ts.URL }

// TestWithoutTokensOnlyLoopbackHostsAreServed: a server without tokens
// (loopback only) serves a request only when its Host names loopback
// (localhost, 127.0.0.0/8, ::1, any port) or the listen address; any
// other Host — a DNS-rebinding page's own name — is 421 JSON, on every
// path, open ones included, and changes nothing. With tokens the Host is
// not looked at: the token protects.
func TestWithoutTokensOnlyLoopbackHostsAreServed(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{Tokens: []api.Token{}})
	for _, host := range []string{"", "localhost", "LOCALHOST:8080", "127.0.0.1", "127.3.2.1:9", "[::1]:8080", "[::1]", api.DefaultListen} {
		header := map[string]string{}
		if host != "" {
			header["Host"] = host
		}
		w.wantStatus(w.request(http.MethodGet, "/v1/agents", header, ""), http.StatusOK)
	}
	for _, host := range []string{"evil.example", "evil.example:8080", "localhost.evil.example", "127.0.0.1.nip.io", "10.0.0.5:8080", "[2001:db8::1]:8080", "0.0.0.0:8080"} {
		for _, path := range []string{"/v1/agents", "/healthz", "/metrics", "/"} {
			r := w.request(http.MethodGet, path, map[string]string{"Host": host}, "")
			w.wantStatus(r, http.StatusMisdirectedRequest)
			if msg := r.errorText(t); !strings.Contains(msg, "loopback") || !strings.Contains(msg, "api.tokens") {
				t.Fatalf("421 for Host %q says %q", host, msg)
			}
		}
		r := w.request(http.MethodPost, "/v1/agents/alpha/pause", map[string]string{"Host": host}, "")
		w.wantStatus(r, http.StatusMisdirectedRequest)
	}
	if w.agent("alpha").Status().Paused {
		t.Fatal("a misdirected request paused the agent")
	}

	tokened := newWorld(t, api.Options{})
	r := tokened.request(http.MethodGet, "/v1/agents", map[string]string{"Host": "agent-worker.example", "Authorization": "Bearer " + readToken}, "")
	tokened.wantStatus(r, http.StatusOK)
}

// TestWithoutTokensCrossSiteWritesAreRefused: without tokens, a write
// (POST, PUT, PATCH, DELETE) whose Origin names a host that is not
// loopback, or is opaque, or whose Sec-Fetch-Site is neither same-origin
// nor none, is 403 JSON and changes nothing — another site's page, even
// one served from a sibling port, cannot drive the agents through the
// user's browser. The status page's own verbs (same origin) and the CLI
// (no Origin) still work, and reads are not refused for their Origin.
func TestWithoutTokensCrossSiteWritesAreRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{Tokens: []api.Token{}})
	refused := []map[string]string{
		{"Origin": "https://evil.example"},
		{"Origin": "null"},
		{"Origin": "http://127.0.0.1.nip.io:8080"},
		{"Sec-Fetch-Site": "cross-site"},
		{"Sec-Fetch-Site": "same-site"},
		{"Origin": w.origin(), "Sec-Fetch-Site": "cross-site"},
		{"Origin": "https://evil.example", "Sec-Fetch-Site": "same-origin"},
	}
	for _, h := range refused {
		for _, method := range []string{http.MethodPost, http.MethodDelete} {
			path := "/v1/agents/alpha/pause"
			if method == http.MethodDelete {
				path = "/v1/agents/alpha/memory"
			}
			r := w.request(method, path, h, "")
			w.wantStatus(r, http.StatusForbidden)
			if msg := r.errorText(t); !strings.Contains(msg, "cross-site") {
				t.Fatalf("%s with %v: 403 says %q", method, h, msg)
			}
		}
		// A form post from another site, the classic forgery.
		h["Content-Type"] = "text/plain"
		w.wantStatus(w.request(http.MethodPost, "/v1/agents/alpha/messages", h, `{"text": "rm -rf /"}`), http.StatusForbidden)
	}
	if w.agent("alpha").Status().Paused || len(w.agent("alpha").Queued()) != 0 {
		t.Fatal("a cross-site write changed the agent")
	}
	// Reads are not refused for their Origin: without CORS headers the
	// other site cannot read the answer anyway.
	w.wantStatus(w.request(http.MethodGet, "/v1/agents", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, ""), http.StatusOK)

	for _, h := range []map[string]string{
		{}, // the CLI, curl
		{"Origin": w.origin(), "Sec-Fetch-Site": "same-origin"}, // the status page
		{"Origin": "http://localhost:8080"},                     // an older browser on loopback
		{"Sec-Fetch-Site": "none"},                              // typed by the user
	} {
		w.wantStatus(w.request(http.MethodPost, "/v1/agents/alpha/pause", h, ""), http.StatusOK)
		w.wantStatus(w.request(http.MethodPost, "/v1/agents/alpha/resume", h, ""), http.StatusOK)
	}
}

// TestWritesTakeJSONOrNothing: on every server, a write whose
// Content-Type is not application/json is 415 JSON, and so is a write
// with a body but no Content-Type — /v1/reload too, which reads no body —
// before the route does anything; a write with neither body nor
// Content-Type is served. The login form keeps its form encoding.
func TestWritesTakeJSONOrNothing(t *testing.T) {
	t.Parallel()
	for _, tokened := range []bool{false, true} {
		var reloads atomic.Int32
		o := api.Options{Reload: func(context.Context, string) (api.ReloadReport, error) {
			reloads.Add(1)
			return api.ReloadReport{Outcome: "unchanged"}, nil
		}}
		header := func(kv ...string) map[string]string {
			h := map[string]string{}
			if tokened {
				h["Authorization"] = "Bearer " + operateToken
			}
			for i := 0; i+1 < len(kv); i += 2 {
				h[kv[i]] = kv[i+1]
			}
			return h
		}
		if !tokened {
			o.Tokens = []api.Token{}
		}
		w := newWorld(t, o)
		for _, path := range []string{"/v1/reload", "/v1/agents/alpha/pause", "/v1/agents/alpha/schedules/nightly/run"} {
			for _, q := range []struct {
				header map[string]string
				body   string
			}{
				{header("Content-Type", "text/plain"), "reload=1"},
				{header("Content-Type", "text/plain"), ""},
				{header("Content-Type", "application/x-www-form-urlencoded"), ""},
				{header("Content-Type", "multipart/form-data; boundary=x"), ""},
				{header(), "{}"},
			} {
				r := w.request(http.MethodPost, path, q.header, q.body)
				w.wantStatus(r, http.StatusUnsupportedMediaType)
				if msg := r.errorText(t); !strings.Contains(msg, "application/json") {
					t.Fatalf("415 says %q", msg)
				}
			}
		}
		if n := reloads.Load(); n != 0 {
			t.Fatalf("tokens %v: a reload ran %d times for a request that is not JSON", tokened, n)
		}
		if w.agent("alpha").Status().Paused {
			t.Fatal("a write that is not JSON paused the agent")
		}
		w.wantStatus(w.request(http.MethodPost, "/v1/reload", header(), ""), http.StatusOK)
		w.wantStatus(w.request(http.MethodPost, "/v1/reload", header("Content-Type", "application/json"), "{}"), http.StatusOK)
		w.wantStatus(w.request(http.MethodPost, "/v1/reload", header("Content-Type", "application/json; charset=utf-8"), ""), http.StatusOK)
		w.wantStatus(w.request(http.MethodPost, "/v1/reload", header("Content-Type", "application/json"), `{"force": true}`), http.StatusBadRequest)
		if n := reloads.Load(); n != 3 {
			t.Fatalf("tokens %v: %d reloads, want 3", tokened, n)
		}
		w.wantStatus(w.request(http.MethodPost, "/v1/agents/alpha/pause", header(), ""), http.StatusOK)
	}
	// The login form is form-encoded, as browsers post it.
	w := newWorld(t, api.Options{})
	w.wantStatus(w.browse(visit{method: http.MethodPost, path: "/login", form: url.Values{"token": {operateToken}}}), http.StatusSeeOther)
}

// TestWithoutTokensInChromium: in real headless Chromium, on a server
// without tokens, the status page's own verb buttons still work (the
// browser sends its Origin and Sec-Fetch-Site: same-origin), while a page
// of another site — here one on another port of 127.0.0.1, which the
// browser calls same-site — that fires a bodiless POST at the API (no
// preflight: a "simple" request) pauses nothing.
func TestWithoutTokensInChromium(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{Tokens: []api.Token{}})
	attacker := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(rw, `<!doctype html><title>another site</title><p>nothing to see</p>`)
	}))
	t.Cleanup(attacker.Close)
	ctx := startChromium(t, 30*time.Second)

	if err := chromedp.Do(ctx,
		chromedp.Navigate(w.ts.URL+"/"),
		chromedp.Click(chromedp.CSS(`tr[data-agent="alpha"] button[data-verb="pause"]`)),
	); err != nil {
		t.Fatalf("click pause on the status page: %v", err)
	}
	wait.For(t, "alpha paused by the page", func() bool { return w.agent("alpha").Status().Paused })
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`tr[data-agent="alpha"][data-state="paused"]`))); err != nil {
		t.Fatalf("the page, reloaded, does not show alpha paused: %v", err)
	}

	// The other page's script sends the request and waits for its
	// (opaque) answer.
	send := `fetch(` + strconv.Quote(w.ts.URL+"/v1/agents/beta/pause") + `, {method: "POST", mode: "no-cors"}).then(() => "sent")`
	if err := chromedp.Do(ctx, chromedp.Navigate(attacker.URL+"/"), chromedp.WaitReady("body")); err != nil {
		t.Fatalf("open the other page: %v", err)
	}
	if sent, err := chromedp.Run(ctx, chromedp.Evaluate[string](send, chromedp.EvalAwaitPromise)); err != nil || sent != "sent" {
		t.Fatalf("the other page's request: %q, %v", sent, err)
	}
	// The answer came back: the request was served, or refused.
	if w.agent("beta").Status().Paused {
		t.Fatal("a page of another site paused beta through the browser")
	}
	wait.For(t, "the other page's request refused in the log", func() bool {
		return strings.Contains(w.logs.String(), `msg="api request refused: not from this machine" method=POST path=/v1/agents/beta/pause status=403`)
	})
}
