package metrics_test

import (
	"testing"

	"github.com/agent-worker/agent-worker/metrics"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Failed authentications count by route, bounded like the request
// series: a route outside SetHTTPRoutes' counts as "other", and every
// route's series exists at 0 from the start, so increase() sees the first
// failure.
func TestAuthFailuresByRoute(t *testing.T) {
	t.Parallel()
	m := metrics.New(testAgents(), nil)
	m.AuthFailure("GET /v1/agents") // routes not set yet
	m.SetHTTPRoutes([]string{"GET /v1/agents", "POST /login"})
	expect(t, series(t, m.Registry()), map[string]float64{
		`agent_worker_auth_failures_total{route="GET /v1/agents"}`: 0,
		`agent_worker_auth_failures_total{route="POST /login"}`:    0,
		`agent_worker_auth_failures_total{route="other"}`:          1,
	})
	m.AuthFailure("POST /login")
	m.AuthFailure("POST /login")
	m.AuthFailure("GET /v1/agents")
	m.AuthFailure("/v1/guessed-path-0001")
	expect(t, series(t, m.Registry()), map[string]float64{
		`agent_worker_auth_failures_total{route="GET /v1/agents"}`: 1,
		`agent_worker_auth_failures_total{route="POST /login"}`:    2,
		`agent_worker_auth_failures_total{route="other"}`:          2,
	})
	if n := testutil.CollectAndCount(m.Registry(), "agent_worker_auth_failures_total"); n != 3 {
		t.Errorf("%d auth failure series, want 3", n)
	}
}
