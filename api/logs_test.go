package api_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/agent-worker/agent-worker/api"
)

// maxLogLine is the longest log line the test accepts: a record's fixed
// fields and a handful of clipped values fit many times over.
const maxLogLine = 2 << 10

// TestClientValuesInLogsAreBoundedAndEscaped sends requests whose path,
// agent name, id and header values are huge or hold newlines, NUL and
// ANSI escapes, to a server with tokens, and checks every log line
// written: each under 2 KB, each one JSON record, and no value in it
// holding a control character once decoded — so no request can make an
// unbounded log line or forge one.
func TestClientValuesInLogsAreBoundedAndEscaped(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	w := newWorld(t, api.Options{
		Log: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Tokens: withTokens(
			api.Token{Name: "beta-reader", Role: api.RoleRead, Value: betaReadToken, Agents: []string{"beta"}},
			api.Token{Name: "am", Role: api.RoleIngest, Value: alphaIngestToken, Agents: []string{"alpha"}},
		),
	})
	hugePath := "/" + strings.Repeat("a", 500<<10)
	longName := strings.Repeat("n", 100_000)
	// %0A and %0D are a newline and a carriage return once decoded, %00
	// NUL, %1B the ESC of an ANSI colour, %E2%80%A8 U+2028.
	forged := `x%0Atime=2026-01-01 level=ERROR msg="forged"%0D%0A%00%1B%5B31mred%1B%5B0m%E2%80%A8`

	type request struct {
		method, path, token string
		header              map[string]string
		body                string
		want                int
	}
	requests := []request{
		{method: "GET", path: hugePath, want: http.StatusUnauthorized},
		{method: "GET", path: hugePath, token: "wrong", want: http.StatusUnauthorized},
		{method: "POST", path: "/v1/agents/" + longName + "/pause", token: operateToken, want: http.StatusNotFound},
		{method: "POST", path: "/v1/agents/" + longName + "/messages", token: alphaIngestToken, body: `{"text": "x"}`, want: http.StatusForbidden},
		{method: "GET", path: "/v1/agents/" + longName, token: betaReadToken, want: http.StatusForbidden},
		{method: "GET", path: "/v1/agents/" + forged, want: http.StatusUnauthorized},
		{method: "POST", path: "/v1/agents/" + forged + "/pause", token: operateToken, want: http.StatusNotFound},
		{method: "GET", path: "/v1/agents/" + forged, token: betaReadToken, want: http.StatusForbidden},
		{method: "GET", path: "/v1/agents", header: map[string]string{"User-Agent": strings.Repeat("u", 100_000)}, want: http.StatusUnauthorized},
		{method: "POST", path: "/v1/agents/alpha/messages", token: operateToken, body: `{"text": "x", "id": "` + strings.Repeat("i", 60_000) + `"}`, want: http.StatusAccepted},
		{method: "POST", path: "/v1/agents/alpha/messages", token: operateToken, body: `{"text": "x"}`,
			header: map[string]string{"Content-Type": "text/plain; x=" + strings.Repeat("c", 100_000)}, want: http.StatusUnsupportedMediaType},
	}
	for _, q := range requests {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		req, err := http.NewRequestWithContext(ctx, q.method, w.ts.URL+q.path, strings.NewReader(q.body))
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		if q.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if q.token != "" {
			req.Header.Set("Authorization", "Bearer "+q.token)
		}
		for k, v := range q.header {
			req.Header.Set(k, v)
		}
		resp, err := w.ts.Client().Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		resp.Body.Close()
		cancel()
		if resp.StatusCode != q.want {
			t.Fatalf("%s %.60s…: status %d, want %d", q.method, q.path, resp.StatusCode, q.want)
		}
	}

	// Three requests came without a token from one client: the first is
	// logged on its own, the other two in the client's summary line a
	// minute later (throttle.go). So every request is in the log once
	// that minute has passed: len(requests)-2 lines, and the summary.
	w.clock.Advance(api.AuthFailureWindow)
	wantLines := len(requests) - 1
	// The server logs a request after answering it: wait for the lines,
	// then check whatever was written (a missing line fails below).
	for end := time.Now().Add(deadline); strings.Count(logs.String(), `"msg":"api `) < wantLines && time.Now().Before(end); {
		<-time.After(time.Millisecond)
	}
	lines := strings.Split(strings.TrimSuffix(logs.String(), "\n"), "\n")
	var clipped, escaped, fromRequests int
	for i, line := range lines {
		if len(line) >= maxLogLine {
			t.Errorf("log line %d is %d bytes: %.200s…", i, len(line), line)
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("log line %d is not one JSON record (%v): %q", i, err, line)
			continue
		}
		if strings.HasPrefix(rec["msg"].(string), "api ") {
			fromRequests++
		}
		for k, v := range rec {
			s, ok := v.(string)
			if !ok {
				continue
			}
			if at := strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) || r == '\u2028' }); at >= 0 {
				t.Errorf("log line %d: %s holds a raw control character at byte %d: %.300q", i, k, at, s)
			}
			if strings.HasSuffix(s, "…") {
				clipped++
			}
			if strings.Contains(s, `\n`) && strings.Contains(s, `\x1b`) {
				escaped++
			}
		}
	}
	// Every request above is logged: 401s and refused reads as warnings
	// (a client's 401s after its first in its summary), writes always.
	if fromRequests < wantLines || !strings.Contains(logs.String(), `"msg":"api authentication refused","remote":"127.0.0.1","failures":0,"without_credential":2`) {
		t.Errorf("%d request log lines for %d requests, want %d with the summary of two 401s:\n%s", fromRequests, len(requests), wantLines, logs.String())
	}
	if clipped < 8 || escaped < 3 {
		t.Errorf("%d clipped values (want 8 or more), %d escaped ones (want 3 or more):\n%s", clipped, escaped, logs.String())
	}
}
