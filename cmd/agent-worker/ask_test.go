package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

const askAnswerBody = `{"agent": "oncall", "answer": "db-1's disk reached 95%, and you are on call.\n", "model": "gpt-4.1-mini", "tokens_in": 1200, "tokens_out": 40, "cost_usd": 0.000544, "history_turns": 3, "calls_not_run": ["publish"], "duration_ms": 812, "owner": "replica-a"}`

// ask posts the words after AGENT as one question with the token, and
// prints the answer's text on stdout and its cost on stderr; -o json
// prints the API's body; a refusal is the API's error and exit 1.
func TestAskGolden(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		data, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(data, &body)
		mu.Lock()
		got = append(got, body)
		mu.Unlock()
		switch {
		case r.Method != http.MethodPost || r.Header.Get("Authorization") != "Bearer s3cret":
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error": "no token"}`)
		case r.URL.Path == "/v1/agents/oncall/ask":
			_, _ = io.WriteString(w, askAnswerBody)
		case r.URL.Path == "/v1/agents/halted/ask":
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"error": "agent is halted (session spend $10 reached the session ceiling of $10)", "guardrail": "session_usd", "tripped": true}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error": "unknown agent"}`)
		}
	}))
	t.Cleanup(srv.Close)
	env := testEnv(map[string]string{envToken: "s3cret", envAPI: srv.URL})

	out, errOut, code := run(env, "ask", "oncall", "why", "did", "you", "page", "me?")
	if code != exitOK || out != "db-1's disk reached 95%, and you are on call.\n" ||
		errOut != "(the model asked to call publish: not run)\n— gpt-4.1-mini on replica-a: 1200 tokens in, 40 out, $0.00054\n" {
		t.Fatalf("ask: exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
	out, _, code = run(env, "ask", "oncall", "what are you waiting for?", "-o", "json")
	if code != exitOK || !strings.HasPrefix(out, "{\n  \"agent\": \"oncall\",\n") || compact(t, out) != compact(t, askAnswerBody) {
		t.Fatalf("ask -o json: exit %d\n%s", code, out)
	}
	_, errOut, code = run(env, "ask", "halted", "why?")
	if code != exitFailed || !strings.Contains(errOut, "agent is halted") || !strings.Contains(errOut, "(HTTP 409)") {
		t.Fatalf("ask of a halted agent: exit %d\n%s", code, errOut)
	}
	if _, _, code = run(env, "ask", "oncall"); code != exitConfig {
		t.Fatalf("ask without a question: exit %d, want %d", code, exitConfig)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 || got[0]["question"] != "why did you page me?" || got[1]["question"] != "what are you waiting for?" || len(got[0]) != 1 {
		t.Fatalf("bodies posted %v", got)
	}
}

// compact is the JSON text s without insignificant space, keys sorted.
func compact(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
