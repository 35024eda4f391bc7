package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
	"unicode/utf8"

	"google.golang.org/adk/tool"
	"google.golang.org/adk/tool/functiontool"

	"github.com/agent-worker/agent-worker/internal/textclip"
	"github.com/agent-worker/agent-worker/tools/urlprefix"
	"github.com/agent-worker/agent-worker/tracing"
)

// HTTPGet is the tool name of a read-only HTTP fetch.
const HTTPGet = "http_get"

// maxHTTPBody bounds what http_get reads of a response.
const maxHTTPBody = 64 << 10

// HTTPGetArgs are http_get's arguments.
type HTTPGetArgs struct {
	URL string `json:"url" jsonschema:"the URL to GET; it must start with one of the allowed prefixes"`
}

// HTTPGetResult is what the model is told.
type HTTPGetResult struct {
	Status    int    `json:"status"`
	Body      string `json:"body"`
	Truncated bool   `json:"truncated,omitempty"`
}

// maxRedirects bounds the redirects one http_get follows.
const maxRedirects = 5

// newHTTPGet builds http_get. What it guarantees, assuming the model
// chooses every URL and every server it reaches is hostile:
//
//   - it sends only GET requests, without credentials, to normalised URLs
//     under env.HTTPAllow (see urlprefix.Target, urlprefix.Prefixes.allows); the URL
//     sent is the URL checked;
//   - every redirect hop is normalised and checked the same way before it
//     is sent, at most maxRedirects of them; a refused hop is an error
//     naming it, and its server receives nothing;
//   - it connects only to addresses addrPolicy allows, checked after DNS
//     on the address dialled, never through a proxy;
//   - it reads at most maxHTTPBody bytes of a response.
//
// It does not guarantee that an allowed server is honest: what it returns
// is untrusted text for the model.
func newHTTPGet(env Env) (tool.Tool, error) {
	if len(env.HTTPAllow) == 0 {
		return nil, errors.New("http_get needs http_get prefixes in the agent's config (the URLs it may read)")
	}
	allow, err := urlprefix.ParsePrefixes(env.HTTPAllow)
	if err != nil {
		return nil, err
	}
	client, err := newHTTPGetClient(env, allow)
	if err != nil {
		return nil, err
	}
	return newTool(functiontool.Config{
		Name: HTTPGet,
		Description: "Read a web page or API over HTTP GET. Allowed URL prefixes: " + allow.String() +
			". Redirects are followed only within these prefixes.",
	}, func(tctx tool.Context, a HTTPGetArgs) (HTTPGetResult, error) {
		t, err := urlprefix.Parse(a.URL)
		if err != nil {
			return HTTPGetResult{}, fmt.Errorf("%q is not an allowed http(s) URL: %v", a.URL, err)
		}
		if !allow.Allows(t) {
			return HTTPGetResult{}, fmt.Errorf("URL %q (normalised: %s) is not allowed for this agent; allowed prefixes: %s", a.URL, t, allow)
		}
		var ctx context.Context = tctx
		if ctx == nil {
			ctx = context.Background()
		}
		u := t.URL()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return HTTPGetResult{}, err
		}
		req.Header.Set("User-Agent", "agent-worker")
		tracing.InjectHTTP(ctx, req.Header) // the tool call's trace continues at the server
		resp, err := client.Do(req)
		if err != nil {
			return HTTPGetResult{}, fmt.Errorf("GET %s: %w", u, refusal(err))
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(io.LimitReader(resp.Body, maxHTTPBody+1))
		if err != nil {
			return HTTPGetResult{}, fmt.Errorf("GET %s: read body: %w", u, err)
		}
		out := HTTPGetResult{Status: resp.StatusCode, Body: string(data)}
		if len(data) > maxHTTPBody {
			// Cut at a rune boundary: a text body cut mid-rune would read
			// as non-text below.
			out.Body, out.Truncated = textclip.Bytes(out.Body, maxHTTPBody, ""), true
		}
		if !utf8.ValidString(out.Body) {
			out.Body = fmt.Sprintf("(%d bytes of non-text content, %s)", min(len(data), maxHTTPBody), resp.Header.Get("Content-Type"))
		}
		return out, nil
	})
}

// newHTTPGetClient returns http_get's client: the address policy's
// dialer, no proxy, the redirect check, and checkedTransport as a
// backstop. env.HTTPClient may set its Timeout (default 15s) and nothing
// else: a transport, redirect policy or cookie jar of its own would step
// around the checks.
func newHTTPGetClient(env Env, allow urlprefix.Prefixes) (*http.Client, error) {
	c := &http.Client{Timeout: 15 * time.Second}
	if h := env.HTTPClient; h != nil {
		if h.Transport != nil || h.CheckRedirect != nil || h.Jar != nil {
			return nil, errors.New("http_get uses its own transport and redirect policy (they enforce its checks); its HTTPClient may set only Timeout")
		}
		c.Timeout = h.Timeout
	}
	policy := newAddrPolicy(env.HTTPAllowPrivate, env.HTTPResolver)
	c.Transport = &checkedTransport{allow: allow, base: &http.Transport{
		// Proxy stays nil: with a proxy, the dial check would check the
		// proxy, and the proxy would then reach anything.
		Proxy:                 nil,
		DialContext:           policy.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          10,
		IdleConnTimeout:       30 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}}
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		to := req.URL.Redacted()
		if len(via) > maxRedirects {
			return &redirectRefusedError{to: to, why: fmt.Sprintf("http_get follows at most %d redirects", maxRedirects)}
		}
		t, err := urlprefix.Parse(req.URL.String())
		if err != nil {
			return &redirectRefusedError{to: to, why: err.Error()}
		}
		if !allow.Allows(t) {
			return &redirectRefusedError{to: to, why: "not under the allowed prefixes (" + allow.String() + ")"}
		}
		// Send what was checked. The client reads req.URL after this
		// returns; Host empty means the URL's host.
		req.URL, req.Host = t.URL(), ""
		return nil
	}
	return c, nil
}

// redirectRefusedError is a redirect http_get would not follow.
type redirectRefusedError struct{ to, why string }

func (e *redirectRefusedError) Error() string {
	return fmt.Sprintf("redirect to %s refused: %s", e.to, e.why)
}

// refusal returns the refusal inside err, without the client's
// `Get "url":` wrapping, or err itself.
func refusal(err error) error {
	var r *redirectRefusedError
	if errors.As(err, &r) {
		return r
	}
	var a *addrRefusedError
	if errors.As(err, &a) {
		return a
	}
	return err
}

// checkedTransport sends only requests whose URL is already a normalised
// URL under the prefixes. The tool and CheckRedirect ensure that; this is
// the backstop that keeps it true if either is changed.
type checkedTransport struct {
	allow urlprefix.Prefixes
	base  http.RoundTripper
}

func (c *checkedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	u := req.URL.String()
	t, err := urlprefix.Parse(u)
	if err != nil || !c.allow.Allows(t) || t.String() != u || req.Host != "" && req.Host != req.URL.Host || req.Method != http.MethodGet {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, fmt.Errorf("refused: %s %s was not checked against the allowed prefixes", req.Method, req.URL.Redacted())
	}
	return c.base.RoundTrip(req)
}
