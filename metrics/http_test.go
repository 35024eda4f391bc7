package metrics_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/metrics"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

const amRoute = "POST /v1/alertmanager/{name}"

// Route labels are bounded by the routes set: anything else is "other",
// and so is everything before the routes are known.
func TestHTTPRequestsByRouteAndCode(t *testing.T) {
	t.Parallel()
	m := metrics.New(testAgents(), nil)
	m.HTTPRequest(amRoute, http.StatusAccepted, time.Millisecond) // routes not set yet
	m.SetHTTPRoutes([]string{amRoute, "GET /v1/agents/{name}"})
	got := series(t, m.Registry())
	expect(t, got, map[string]float64{
		`agent_worker_http_request_duration_seconds_count{route="POST /v1/alertmanager/{name}"}`: 0,
		`agent_worker_http_request_duration_seconds_count{route="GET /v1/agents/{name}"}`:        0,
		`agent_worker_http_request_duration_seconds_count{route="other"}`:                        1,
		`agent_worker_http_requests_total{code="202",route="other"}`:                             1,
		// Server errors exist at 0 from the start, so increase() sees the
		// first one.
		`agent_worker_http_requests_total{code="503",route="POST /v1/alertmanager/{name}"}`: 0,
		`agent_worker_http_requests_total{code="500",route="GET /v1/agents/{name}"}`:        0,
		`agent_worker_http_requests_total{code="503",route="other"}`:                        0,
	})
	m.HTTPRequest(amRoute, http.StatusAccepted, 30*time.Millisecond)
	m.HTTPRequest(amRoute, http.StatusAccepted, 10*time.Millisecond)
	m.HTTPRequest(amRoute, http.StatusRequestEntityTooLarge, time.Millisecond)
	m.HTTPRequest("/v1/alertmanager/evil-agent-name-0001", http.StatusNotFound, 0)
	m.HTTPRequest(amRoute, 7, 0)
	got = series(t, m.Registry())
	expect(t, got, map[string]float64{
		`agent_worker_http_requests_total{code="202",route="POST /v1/alertmanager/{name}"}`:      2,
		`agent_worker_http_requests_total{code="413",route="POST /v1/alertmanager/{name}"}`:      1,
		`agent_worker_http_requests_total{code="other",route="POST /v1/alertmanager/{name}"}`:    1,
		`agent_worker_http_requests_total{code="404",route="other"}`:                             1,
		`agent_worker_http_request_duration_seconds_count{route="POST /v1/alertmanager/{name}"}`: 4,
		`agent_worker_http_request_duration_seconds_sum{route="POST /v1/alertmanager/{name}"}`:   0.041,
	})
	if n := testutil.CollectAndCount(m.Registry(), "agent_worker_http_requests_total"); n != 5+3*2 {
		t.Errorf("%d request series, want 5 counted and 500/503 for 3 routes", n)
	}
}

// Notifications count per configured agent and known outcome only.
func TestAlertmanagerNotificationsByOutcome(t *testing.T) {
	t.Parallel()
	m := metrics.New(testAgents(), nil)
	m.AlertmanagerNotification("oncall", "accepted")
	m.AlertmanagerNotification("oncall", "truncated")
	m.AlertmanagerNotification("oncall", "accepted")
	m.AlertmanagerNotification("demo", "rejected")
	m.AlertmanagerNotification("ghost", "accepted") // not configured
	m.AlertmanagerNotification("oncall", "exploded")
	got := series(t, m.Registry())
	expect(t, got, map[string]float64{
		`agent_worker_alertmanager_notifications_total{agent="oncall",outcome="accepted"}`:  2,
		`agent_worker_alertmanager_notifications_total{agent="oncall",outcome="truncated"}`: 1,
		`agent_worker_alertmanager_notifications_total{agent="oncall",outcome="duplicate"}`: 0,
		`agent_worker_alertmanager_notifications_total{agent="demo",outcome="rejected"}`:    1,
		`agent_worker_events_dropped_total{reason="unconfigured"}`:                          1,
	})
	for k := range family(got, "agent_worker_alertmanager_notifications_total") {
		if strings.Contains(k, "ghost") || strings.Contains(k, "exploded") || strings.Contains(k, "other") {
			t.Errorf("unbounded series %s", k)
		}
	}
}
