package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/adk/tool"
	"google.golang.org/adk/tool/functiontool"
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

func newHTTPGet(env Env) (tool.Tool, error) {
	if len(env.HTTPAllow) == 0 {
		return nil, errors.New("http_get needs http_get prefixes in the agent's config (the URLs it may read)")
	}
	client := env.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 15 * time.Second}
	}
	allow := strings.Join(env.HTTPAllow, ", ")
	return functiontool.New(functiontool.Config{
		Name:        HTTPGet,
		Description: "Read a web page or API over HTTP GET. Allowed URL prefixes: " + allow + ".",
	}, func(tctx tool.Context, a HTTPGetArgs) (HTTPGetResult, error) {
		u, err := url.Parse(a.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return HTTPGetResult{}, fmt.Errorf("%q is not an http(s) URL", a.URL)
		}
		if u.User != nil {
			return HTTPGetResult{}, errors.New("URLs with credentials are not allowed")
		}
		if !allowedURL(env.HTTPAllow, u.String()) {
			return HTTPGetResult{}, fmt.Errorf("URL %q is not allowed for this agent; allowed prefixes: %s", a.URL, allow)
		}
		var ctx context.Context = tctx
		if ctx == nil {
			ctx = context.Background()
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return HTTPGetResult{}, err
		}
		req.Header.Set("User-Agent", "agent-worker")
		resp, err := client.Do(req)
		if err != nil {
			return HTTPGetResult{}, fmt.Errorf("GET %s: %w", u.Redacted(), err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(io.LimitReader(resp.Body, maxHTTPBody+1))
		if err != nil {
			return HTTPGetResult{}, fmt.Errorf("GET %s: read body: %w", u.Redacted(), err)
		}
		out := HTTPGetResult{Status: resp.StatusCode}
		if len(data) > maxHTTPBody {
			data, out.Truncated = data[:maxHTTPBody], true
		}
		if !utf8.Valid(data) {
			out.Body = fmt.Sprintf("(%d bytes of non-text content, %s)", len(data), resp.Header.Get("Content-Type"))
			return out, nil
		}
		out.Body = string(data)
		return out, nil
	})
}

// allowedURL reports whether u starts with one of the prefixes. A prefix
// that names only a host ("https://status.example.com") also matches its
// paths, but never another host that merely starts the same way
// ("https://status.example.com.evil.net").
func allowedURL(prefixes []string, u string) bool {
	for _, p := range prefixes {
		if !strings.HasPrefix(u, p) {
			continue
		}
		rest := u[len(p):]
		if strings.HasSuffix(p, "/") || rest == "" || strings.HasPrefix(rest, "/") || strings.HasPrefix(rest, "?") {
			return true
		}
	}
	return false
}
