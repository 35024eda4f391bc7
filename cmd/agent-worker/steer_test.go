package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSteerVerb: `steer AGENT TEXT` posts the text as a steered message
// and prints where it went as one line (golden): into the running turn,
// or, with none running, as a wake; -o json prints the API's answer; a
// refusal is exit 1 with the API's words.
func TestSteerVerb(t *testing.T) {
	t.Parallel()
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(data))
		if r.Method != http.MethodPost || r.URL.Path != "/v1/agents/oncall/messages" || r.Header.Get("Authorization") != "Bearer tok" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.Contains(string(data), "paused"):
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"error": "agent \"oncall\" is paused and runs no turn to steer"}`)
		case strings.Contains(string(data), "idle"):
			w.WriteHeader(http.StatusAccepted)
			_, _ = io.WriteString(w, `{"status": "woke", "id": "steer-b", "woke": true, "owner": "r1"}`)
		default:
			w.WriteHeader(http.StatusAccepted)
			_, _ = io.WriteString(w, `{"status": "steered", "id": "steer-a", "turn": 7, "owner": "r1"}`)
		}
	}))
	t.Cleanup(srv.Close)
	env := testEnv(map[string]string{envToken: "tok"})
	for _, c := range []struct {
		text, out, errIncludes string
		json                   bool
		code                   int
	}{
		{text: "skip db-2", out: "oncall: turn 7 takes your message before its next model call (steer-a)\n"},
		{text: "idle now", out: "oncall: no turn was running; woke it with your message (steer-b)\n"},
		{text: "skip db-2", json: true, out: "{\n  \"status\": \"steered\",\n  \"id\": \"steer-a\",\n  \"turn\": 7,\n  \"owner\": \"r1\"\n}\n"},
		{text: "paused one", code: exitFailed, errIncludes: `is paused and runs no turn to steer (HTTP 409)`},
	} {
		args := []string{"steer", "oncall", c.text, "--api", srv.URL}
		if c.json {
			args = append(args, "-o", "json")
		}
		bodies = nil
		out, errs, code := run(env, args...)
		if code != c.code || out != c.out || !strings.Contains(errs, c.errIncludes) {
			t.Errorf("steer %q: exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr with %q", c.text, code, out, errs, c.code, c.out, c.errIncludes)
		}
		if want := `{"steer":true,"text":"` + c.text + `"}`; len(bodies) != 1 || bodies[0] != want {
			t.Errorf("steer %q sent %q, want %s", c.text, bodies, want)
		}
	}
}
