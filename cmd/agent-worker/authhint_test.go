package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestUnauthorizedNamesTheTokenFlags: a 401 says where the CLI takes a
// token from (--token-file, AGENT_WORKER_TOKEN), and whether one was sent
// at all. On the old code it said only the API's "send Authorization:
// Bearer <token>".
func TestUnauthorizedNamesTheTokenFlags(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		if r.Header.Get("Authorization") == "" {
			_, _ = w.Write([]byte(`{"error": "missing bearer token: send Authorization: Bearer <token>"}`))
			return
		}
		_, _ = w.Write([]byte(`{"error": "unknown token"}`))
	}))
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		name string
		env  map[string]string
		args []string
		want []string
	}{
		{"no token", nil, []string{"pause", "oncall"},
			[]string{"HTTP 401", "no token was sent", "--token-file FILE", "$AGENT_WORKER_TOKEN"}},
		{"a wrong token", map[string]string{envToken: "wrong"}, []string{"status"},
			[]string{"HTTP 401", "refused the token sent", "--token-file", "$AGENT_WORKER_TOKEN"}},
	} {
		_, errs, code := run(testEnv(c.env), append(c.args, "--api", srv.URL)...)
		if code != exitFailed {
			t.Errorf("%s: exit %d (want %d): %s", c.name, code, exitFailed, errs)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", c.name, w, errs)
			}
		}
	}
}
