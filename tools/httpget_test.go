package tools

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/adk/tool"
	"google.golang.org/adk/tool/toolconfirmation"
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
	ts, err := Build([]string{HTTPGet}, Env{HTTPAllow: []string{srv.URL + "/api/"}})
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
	allow := []string{"https://status.example.com"}
	for u, want := range map[string]bool{
		"https://status.example.com":              true,
		"https://status.example.com/api":          true,
		"https://status.example.com?q=1":          true,
		"https://status.example.com.evil.net/api": false,
		"https://status.example.community":        false,
	} {
		if got := allowedURL(allow, u); got != want {
			t.Errorf("allowedURL(%q) = %v, want %v", u, got, want)
		}
	}
}

func TestHTTPGetNeedsPrefixes(t *testing.T) {
	t.Parallel()
	if _, err := Build([]string{HTTPGet}, Env{}); err == nil {
		t.Fatal("http_get built without allowed prefixes")
	}
}
