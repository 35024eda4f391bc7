package api_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// Tokens of the access tests, beyond the world's read and operate ones.
const (
	ingestToken      = "ingest-secret-5b2e"
	alphaOpsToken    = "alpha-ops-secret-3d10"
	betaReadToken    = "beta-read-secret-c4a7"
	alphaIngestToken = "alpha-ingest-secret-0e92"
)

// withTokens returns the world's tokens and more.
func withTokens(more ...api.Token) []api.Token {
	return append(slices.Clone(tokens), more...)
}

func metricsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("agent_worker_up 1\n"))
	})
}

// TestIngestTokenMayOnlyQueue runs every route with an ingest token: it
// queues messages and Alertmanager notifications (202), is served the
// open paths, and is refused everything else with a 403 that says what
// its role may do — reads included.
func TestIngestTokenMayOnlyQueue(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{
		Tokens:  withTokens(api.Token{Name: "am", Role: api.RoleIngest, Value: ingestToken}),
		Metrics: metricsHandler(),
	})
	for _, e := range endpoints(t) {
		ct := ""
		if e.body != "" {
			ct = "application/json"
		}
		r := w.call(e.method, e.at("alpha"), ingestToken, ct, e.body)
		switch {
		case e.open:
			w.wantStatus(r, e.want)
		case e.name == "message" || e.name == "alertmanager":
			w.wantStatus(r, http.StatusAccepted)
			if m := r.json(t); m["queued"] != true {
				t.Fatalf("%s with an ingest token: %s", e.name, r.body)
			}
		default:
			if r.status != http.StatusForbidden {
				t.Fatalf("%s %s with an ingest token: status %d, want 403: %s", e.method, e.path, r.status, r.body)
			}
			msg := r.errorText(t)
			for _, want := range []string{`token "am" has role "ingest"`, "may only queue messages", "POST /v1/alertmanager/{name}"} {
				if !strings.Contains(msg, want) {
					t.Errorf("%s: 403 %q lacks %q", e.name, msg, want)
				}
			}
		}
	}
	if st := w.agent("alpha").State(); st == "paused" {
		t.Fatal("an ingest token paused an agent")
	}
	// The refused reads are logged (after the answer: wait), without the
	// token's value.
	wait.For(t, "a refused read in the log", func() bool {
		for _, line := range strings.Split(w.logs.String(), "\n") {
			if strings.Contains(line, `msg="api read refused" method=GET path=/v1/agents/alpha `) && strings.Contains(line, " token=am ") {
				return true
			}
		}
		return false
	})
	if logs := w.logs.String(); strings.Contains(logs, ingestToken) {
		t.Fatalf("a token value was logged:\n%s", logs)
	}
}

// TestReadTokenMayNotQueue: read is GET only, also for the ingest routes,
// and the 403 says which roles would do.
func TestReadTokenMayNotQueue(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	r := w.call(http.MethodPost, "/v1/agents/alpha/messages", readToken, "application/json", `{"text": "x"}`)
	w.wantStatus(r, http.StatusForbidden)
	if msg := r.errorText(t); !strings.Contains(msg, `needs role "ingest" or "operate"`) || !strings.Contains(msg, "may only read (GET)") {
		t.Fatalf("403 %q", msg)
	}
}

// TestScopedTokens: a token limited to some agents gets 403 for any other
// agent (known or not) on every per-agent route, is served its own, and
// sees only its agents in the list, the status page and the event
// stream; /metrics, which covers every agent, is refused to it unless
// open.
func TestScopedTokens(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{
		Tokens: withTokens(
			api.Token{Name: "alpha-ops", Role: api.RoleOperate, Value: alphaOpsToken, Agents: []string{"al*"}},
			api.Token{Name: "beta-reader", Role: api.RoleRead, Value: betaReadToken, Agents: []string{"beta"}},
			api.Token{Name: "am", Role: api.RoleIngest, Value: alphaIngestToken, Agents: []string{"alpha", "gamma-*"}},
		),
		Metrics:   metricsHandler(),
		OpenPaths: []string{"/healthz"},
	})

	// Every per-agent route refuses another agent, and an unknown one
	// alike: a scoped token learns nothing about agents beyond its own.
	for _, e := range endpoints(t) {
		if e.agent == "" {
			continue
		}
		ct := ""
		if e.body != "" {
			ct = "application/json"
		}
		for _, other := range []string{"beta", "nobody"} {
			r := w.call(e.method, e.at(other), alphaOpsToken, ct, e.body)
			if r.status != http.StatusForbidden {
				t.Fatalf("%s on %s with a token for al*: status %d, want 403: %s", e.name, other, r.status, r.body)
			}
			want := `token "alpha-ops" may not act on agent "` + other + `" (its agents: al*)`
			if msg := r.errorText(t); msg != want {
				t.Fatalf("403 %q, want %q", msg, want)
			}
		}
	}
	if st := w.agent("beta").State(); st == "paused" {
		t.Fatal("a token for al* paused beta")
	}

	// Its own agent is served.
	r := w.call(http.MethodPost, "/v1/agents/alpha/pause", alphaOpsToken, "", "")
	w.wantStatus(r, http.StatusOK)
	w.wantStatus(w.call(http.MethodGet, "/v1/agents/alpha", alphaOpsToken, "", ""), http.StatusOK)
	w.wantStatus(w.call(http.MethodPost, "/v1/agents/alpha/resume", alphaOpsToken, "", ""), http.StatusOK)

	// A scoped ingest token: its agents only, and a 403 naming them.
	r = w.call(http.MethodPost, "/v1/agents/alpha/messages", alphaIngestToken, "application/json", `{"text": "disk full", "wake": false}`)
	w.wantStatus(r, http.StatusAccepted)
	w.wantStatus(w.call(http.MethodPost, "/v1/alertmanager/alpha", alphaIngestToken, "application/json", alertmanagerFiring(t)), http.StatusAccepted)
	r = w.call(http.MethodPost, "/v1/alertmanager/beta", alphaIngestToken, "application/json", alertmanagerFiring(t))
	w.wantStatus(r, http.StatusForbidden)
	if msg, want := r.errorText(t), `token "am" may not act on agent "beta" (its agents: alpha, gamma-*)`; msg != want {
		t.Fatalf("403 %q, want %q", msg, want)
	}
	if st := w.agent("beta").Status(); st.InboxPending != 0 || st.Deferred != 0 {
		t.Fatalf("a refused notification reached beta: %+v", st)
	}

	// Lists show only the token's agents.
	var list struct{ Agents []api.AgentView }
	r = w.call(http.MethodGet, "/v1/agents", betaReadToken, "", "")
	w.wantStatus(r, http.StatusOK)
	decode(t, r.body, &list)
	if len(list.Agents) != 1 || list.Agents[0].Name != "beta" {
		t.Fatalf("beta-reader lists %s", r.body)
	}
	decode(t, w.call(http.MethodGet, "/v1/agents", operateToken, "", "").body, &list)
	if len(list.Agents) != 2 {
		t.Fatalf("an unscoped token lists %d agents", len(list.Agents))
	}
	page := string(w.call(http.MethodGet, "/", betaReadToken, "", "").body)
	if !strings.Contains(page, `data-agent="beta"`) || strings.Contains(page, `data-agent="alpha"`) {
		t.Fatalf("beta-reader's status page shows other agents:\n%s", page)
	}
	w.wantStatus(w.call(http.MethodGet, "/v1/agents/beta", betaReadToken, "", ""), http.StatusOK)
	w.wantStatus(w.call(http.MethodGet, "/v1/agents/alpha", betaReadToken, "", ""), http.StatusForbidden)

	// The event stream of every agent shows only beta's, replayed and
	// live. Events are sent in order, so everything before beta's event
	// is checked too.
	w.wantStatus(w.post("/v1/agents/alpha/pause", ""), http.StatusOK)
	w.wantStatus(w.post("/v1/agents/beta/pause", ""), http.StatusOK)
	s := w.openStream("/v1/events?since=0", map[string]string{"Authorization": "Bearer " + betaReadToken})
	if s.status != http.StatusOK {
		t.Fatalf("stream %d", s.status)
	}
	untilBeta := func(typ string) {
		t.Helper()
		for {
			f := s.next()
			if f.event == api.EventGap {
				continue
			}
			e := f.eventData(t)
			if e.Agent != "beta" {
				t.Fatalf("beta-reader's stream carried %s of %q", e.Type, e.Agent)
			}
			if e.Type == typ {
				return
			}
		}
	}
	untilBeta(events.Paused)
	w.wantStatus(w.post("/v1/agents/alpha/resume", ""), http.StatusOK)
	w.wantStatus(w.post("/v1/agents/beta/resume", ""), http.StatusOK)
	untilBeta(events.Resumed)

	// /metrics covers every agent: refused to a scoped token.
	r = w.call(http.MethodGet, "/metrics", betaReadToken, "", "")
	w.wantStatus(r, http.StatusForbidden)
	if msg := r.errorText(t); !strings.Contains(msg, "every agent") {
		t.Fatalf("403 %q", msg)
	}
	w.wantStatus(w.call(http.MethodGet, "/metrics", readToken, "", ""), http.StatusOK)
	// Open paths stay open to it.
	w.wantStatus(w.call(http.MethodGet, "/healthz", betaReadToken, "", ""), http.StatusOK)
}

func TestNewRefusesBadAgentGlobs(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	for _, agents := range [][]string{{"["}, {"alpha", ""}, {`pay-\`}} {
		_, err := api.New(api.Options{Driver: w.driver, Tokens: []api.Token{{Name: "x", Role: api.RoleRead, Value: "v", Agents: agents}}})
		if !errors.Is(err, api.ErrBadToken) || !strings.Contains(err.Error(), "agents[") {
			t.Errorf("agents %q: %v", agents, err)
		}
	}
	if _, err := api.New(api.Options{Driver: w.driver, Tokens: []api.Token{{Name: "x", Role: api.RoleIngest, Value: "v", Agents: []string{"pay-*", "oncall"}}}}); err != nil {
		t.Fatal(err)
	}
}
