package api_test

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/api"
)

func alertmanagerFiring(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../inbox/testdata/alertmanager_firing.json")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// endpoint is one route as the matrix exercises it. path holds "%s" where
// the agent's name goes.
type endpoint struct {
	name   string
	method string
	path   string
	agent  string // "" when the path names no agent
	body   string // a valid body; "" sends none
	want   int    // status on success
	open   bool   // served without a token
	stream bool   // Server-Sent Events
	// before, if set, readies the world for the successful call.
	before func(w *world)
	// check, if set, looks at the successful answer.
	check func(t *testing.T, w *world, r reply)
}

func (e endpoint) at(agent string) string {
	if e.agent == "" {
		return e.path
	}
	return strings.Replace(e.path, "%s", agent, 1)
}

func (e endpoint) write() bool { return e.method == http.MethodPost }

func endpoints(t *testing.T) []endpoint {
	wantState := func(state string) func(t *testing.T, w *world, r reply) {
		return func(t *testing.T, w *world, r reply) {
			if got := r.json(t)["state"]; got != state {
				t.Fatalf("state %v, want %s: %s", got, state, r.body)
			}
		}
	}
	return []endpoint{
		{name: "healthz", method: "GET", path: "/healthz", want: 200, open: true, check: func(t *testing.T, w *world, r reply) {
			if r.json(t)["status"] != "ok" {
				t.Fatalf("healthz %s", r.body)
			}
		}},
		{name: "readyz", method: "GET", path: "/readyz", want: 200, open: true},
		{name: "metrics", method: "GET", path: "/metrics", want: 200, open: true, check: func(t *testing.T, w *world, r reply) {
			if !strings.Contains(string(r.body), "agent_worker_up 1") {
				t.Fatalf("metrics %s", r.body)
			}
		}},
		{name: "status page", method: "GET", path: "/", want: 200, check: func(t *testing.T, w *world, r reply) {
			if !strings.Contains(string(r.body), `data-agent="alpha"`) {
				t.Fatalf("page lacks alpha's row")
			}
		}},
		{name: "list agents", method: "GET", path: "/v1/agents", want: 200, check: func(t *testing.T, w *world, r reply) {
			if n := len(r.json(t)["agents"].([]any)); n != 2 {
				t.Fatalf("%d agents", n)
			}
		}},
		{name: "get agent", method: "GET", path: "/v1/agents/%s", agent: "alpha", want: 200, check: wantState("sleeping")},
		{name: "agent events", method: "GET", path: "/v1/agents/%s/events", agent: "alpha", want: 200, stream: true},
		{name: "turns", method: "GET", path: "/v1/agents/%s/turns?limit=5", agent: "alpha", want: 200, check: func(t *testing.T, w *world, r reply) {
			if m := r.json(t); m["agent"] != "alpha" || m["turns"] == nil {
				t.Fatalf("turns %s", r.body)
			}
		}},
		{name: "message lookup", method: "GET", path: "/v1/agents/%s/messages/m-404", agent: "alpha", want: 404, check: func(t *testing.T, w *world, r reply) {
			if m := r.json(t); m["status"] != "unknown" || m["id"] != "m-404" {
				t.Fatalf("lookup %s", r.body)
			}
		}},
		{name: "all events", method: "GET", path: "/v1/events", want: 200, stream: true},
		{name: "message", method: "POST", path: "/v1/agents/%s/messages", agent: "alpha", body: `{"text": "disk full on db-1", "id": "m-1"}`, want: 202,
			check: func(t *testing.T, w *world, r reply) {
				m := r.json(t)
				if m["queued"] != true || m["duplicate"] != false || m["id"] != "m-1" {
					t.Fatalf("message answer %s", r.body)
				}
			}},
		{name: "wake", method: "POST", path: "/v1/agents/%s/wake", agent: "alpha", body: `{"message": "check the queue"}`, want: 200,
			check: func(t *testing.T, w *world, r reply) {
				if r.json(t)["ok"] != true {
					t.Fatalf("wake %s", r.body)
				}
				w.waitEvent("alpha", "turn-completed")
			}},
		{name: "pause", method: "POST", path: "/v1/agents/%s/pause", agent: "alpha", body: `{}`, want: 200, check: wantState("paused")},
		{name: "resume", method: "POST", path: "/v1/agents/%s/resume", agent: "alpha", body: `{"message": "carry on"}`, want: 200,
			before: func(w *world) { w.agent("alpha").Pause() }, // resume of an agent that is not paused is 409
			check:  func(t *testing.T, w *world, r reply) { w.waitEvent("alpha", "turn-completed") }},
		{name: "interrupt", method: "POST", path: "/v1/agents/%s/interrupt", agent: "alpha", body: `{"hold": true}`, want: 200, check: wantState("paused")},
		{name: "guardrail reset", method: "POST", path: "/v1/agents/%s/guardrails/reset", agent: "alpha", body: `{"guardrail": "session_usd", "add_budget_usd": 5}`, want: 200,
			check: func(t *testing.T, w *world, r reply) {
				if m := r.json(t); m["ceiling_usd"] != 105.0 || m["added_budget_usd"] != 5.0 {
					t.Fatalf("reset %s", r.body)
				}
			}},
		{name: "schedule run", method: "POST", path: "/v1/agents/%s/schedules/nightly/run", agent: "alpha", body: `{}`, want: 202,
			check: func(t *testing.T, w *world, r reply) {
				e := w.waitEvent("alpha", "turn-started")
				if wakes, _ := e.Data["wakes"].([]string); len(wakes) != 1 || !strings.Contains(wakes[0], "nightly") {
					t.Fatalf("turn woke by %v", e.Data["wakes"])
				}
			}},
		{name: "alertmanager", method: "POST", path: "/v1/alertmanager/%s", agent: "alpha", body: alertmanagerFiring(t), want: 202,
			check: func(t *testing.T, w *world, r reply) {
				if m := r.json(t); m["queued"] != true || m["kind"] != "inbox" {
					t.Fatalf("alertmanager %s", r.body)
				}
			}},
	}
}

// TestEveryEndpoint runs each route through its failure modes and then
// its success, each route in its own world.
func TestEveryEndpoint(t *testing.T) {
	t.Parallel()
	for _, e := range endpoints(t) {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, api.Options{Metrics: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = w.Write([]byte("agent_worker_up 1\n"))
			})})
			path := e.at("alpha")
			ct := ""
			if e.body != "" {
				ct = "application/json"
			}

			if !e.open {
				r := w.call(e.method, path, "", ct, e.body)
				w.wantStatus(r, http.StatusUnauthorized)
				r.errorText(t)
				if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
					t.Fatalf("401 without WWW-Authenticate: %v", r.header)
				}
				r = w.call(e.method, path, "not-a-token", ct, e.body)
				w.wantStatus(r, http.StatusUnauthorized)
				r.errorText(t)
				// The same length as a real token, one byte off.
				r = w.call(e.method, path, operateToken[:len(operateToken)-1]+"x", ct, e.body)
				w.wantStatus(r, http.StatusUnauthorized)
			}
			if e.write() {
				r := w.call(e.method, path, readToken, ct, e.body)
				w.wantStatus(r, http.StatusForbidden)
				if msg := r.errorText(t); !strings.Contains(msg, "operate") {
					t.Fatalf("403 does not say what role is needed: %s", msg)
				}
				w.wantStatus(w.post(path, `{"text": `), http.StatusBadRequest)
				w.post(path, `{"text": `).errorText(t)
				w.wantStatus(w.post(path, `{"text": "x"} {"text": "y"}`), http.StatusBadRequest)

				limit := api.DefaultMaxBody
				if e.name == "alertmanager" {
					limit = api.DefaultAlertmanagerMaxBytes // a payload has its own limit
				}
				big := `{"text": "` + strings.Repeat("x", limit) + `"}`
				r = w.post(path, big)
				w.wantStatus(r, http.StatusRequestEntityTooLarge)
				r.errorText(t)

				body := e.body
				if body == "" {
					body = `{}`
				}
				r = w.call(e.method, path, operateToken, "text/plain", body)
				w.wantStatus(r, http.StatusUnsupportedMediaType)
				r.errorText(t)
				r = w.call(e.method, path, operateToken, "", body)
				w.wantStatus(r, http.StatusUnsupportedMediaType)
			}
			if e.agent != "" {
				r := w.call(e.method, e.at("nobody"), operateToken, ct, e.body)
				w.wantStatus(r, http.StatusNotFound)
				if msg := r.errorText(t); !strings.Contains(msg, `unknown agent "nobody"`) {
					t.Fatalf("404 says %q", msg)
				}
			}

			if e.stream {
				s := w.openStream(path, nil)
				if s.status != http.StatusOK || !strings.HasPrefix(s.header.Get("Content-Type"), "text/event-stream") {
					t.Fatalf("stream: %d %v", s.status, s.header)
				}
				return
			}
			token := readToken
			if e.write() {
				token = operateToken
			}
			if e.open {
				token = ""
			}
			if e.before != nil {
				e.before(w)
			}
			r := w.call(e.method, path, token, ct, e.body)
			w.wantStatus(r, e.want)
			if e.check != nil {
				e.check(t, w, r)
			}
		})
	}
}

func TestUnknownRouteAndWrongMethodAreJSON(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	r := w.get("/v1/nothing-here")
	w.wantStatus(r, http.StatusNotFound)
	r.errorText(t)

	r = w.call(http.MethodDelete, "/v1/agents/alpha", operateToken, "", "")
	w.wantStatus(r, http.StatusMethodNotAllowed)
	r.errorText(t)
	if allow := r.header.Get("Allow"); !strings.Contains(allow, "GET") {
		t.Fatalf("Allow %q", allow)
	}
	r = w.call(http.MethodGet, "/v1/agents/alpha/pause", readToken, "", "")
	w.wantStatus(r, http.StatusMethodNotAllowed)
	r = w.call(http.MethodPost, "/v1/agents/alpha/explode", operateToken, "", "")
	w.wantStatus(r, http.StatusNotFound)

	// Without a token, nothing about the routes is revealed.
	w.wantStatus(w.call(http.MethodGet, "/v1/nothing-here", "", "", ""), http.StatusUnauthorized)
}

func TestOpenPathsAreConfigurable(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{OpenPaths: []string{"/"}})
	w.wantStatus(w.call(http.MethodGet, "/", "", "", ""), http.StatusOK)
	w.wantStatus(w.call(http.MethodGet, "/healthz", "", "", ""), http.StatusUnauthorized)
	w.wantStatus(w.call(http.MethodGet, "/v1/agents", "", "", ""), http.StatusUnauthorized)
}

func TestWithoutTokensEverythingIsOpen(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{Tokens: []api.Token{}})
	w.wantStatus(w.call(http.MethodGet, "/v1/agents", "", "", ""), http.StatusOK)
	w.wantStatus(w.call(http.MethodPost, "/v1/agents/alpha/pause", "", "", ""), http.StatusOK)
	if !strings.Contains(w.logs.String(), "token=anonymous") {
		t.Fatalf("write log does not name the caller:\n%s", w.logs)
	}
}

func TestWritesAreLoggedWithoutTokenValues(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	w.wantStatus(w.post("/v1/agents/alpha/pause", ""), http.StatusOK)
	w.wantStatus(w.call(http.MethodPost, "/v1/agents/alpha/pause", readToken, "", ""), http.StatusForbidden)
	w.wantStatus(w.call(http.MethodPost, "/v1/agents/alpha/pause", "guess-"+operateToken, "", ""), http.StatusUnauthorized)
	logs := w.logs.String()
	for _, want := range []string{"action=pause", "agent=alpha", "token=ops", "status=200", "token=dashboard", "status=403"} {
		if !strings.Contains(logs, want) {
			t.Errorf("write log lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, readToken) || strings.Contains(logs, operateToken) {
		t.Fatalf("a token value was logged:\n%s", logs)
	}
}

func TestReadyz(t *testing.T) {
	t.Parallel()
	reasons := []string{"nats: connection closed", "store: unreachable"}
	w := newWorld(t, api.Options{Ready: func() []string { return reasons }})
	r := w.call(http.MethodGet, "/readyz", "", "", "")
	w.wantStatus(r, http.StatusServiceUnavailable)
	m := r.json(t)
	got, _ := m["reasons"].([]any)
	if m["status"] != "not ready" || len(got) != 2 || got[0] != reasons[0] || got[1] != reasons[1] {
		t.Fatalf("readyz %s", r.body)
	}
}

func TestShutdownRefusesWrites(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	s := w.openStream("/v1/events", nil)
	if err := w.srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/agents/alpha/pause", "/v1/agents/alpha/messages"} {
		r := w.post(path, `{"text": "late"}`)
		w.wantStatus(r, http.StatusServiceUnavailable)
		r.errorText(t)
		if r.header.Get("Retry-After") == "" {
			t.Fatalf("503 without Retry-After")
		}
	}
	if st := w.agent("alpha").State(); st != "sleeping" {
		t.Fatalf("a refused write changed the agent: %s", st)
	}
	w.wantStatus(w.get("/v1/agents/alpha"), http.StatusOK)
	r := w.call(http.MethodGet, "/readyz", "", "", "")
	w.wantStatus(r, http.StatusServiceUnavailable)
	if !strings.Contains(string(r.body), "shutting down") {
		t.Fatalf("readyz during shutdown: %s", r.body)
	}
	// The open stream ends.
	timeout := time.After(deadline)
	for {
		select {
		case _, ok := <-s.frames:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("event stream still open after Shutdown")
		}
	}
}
