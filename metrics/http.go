package metrics

import (
	"strconv"
	"time"
)

// routeOther is the route label of a request outside the routes set with
// SetHTTPRoutes (api.RouteOther).
const routeOther = other

// SetHTTPRoutes bounds the route label of agent_worker_http_requests_total,
// agent_worker_http_request_duration_seconds and
// agent_worker_auth_failures_total to routes (the API's route patterns,
// api.Server.Routes) plus "other", and creates their duration and
// failure series, so they exist from the first scrape. Requests
// reported before it, or for any other route, count as "other". The
// request counter's code label is not a fixed set, so only the server
// errors alerts watch (500, 503) are created at 0 for every route — an
// increase() over a series that starts at its first request would miss
// that request; other codes appear with their first request.
func (m *Metrics) SetHTTPRoutes(routes []string) {
	set := make(map[string]bool, len(routes))
	for _, r := range append(routes, routeOther) {
		set[r] = true
		m.httpDuration.WithLabelValues(r)
		m.authFailures.WithLabelValues(r)
		for _, code := range precreatedCodes {
			m.httpRequests.WithLabelValues(r, code)
		}
	}
	delete(set, routeOther)
	m.routes.Store(&set)
}

// precreatedCodes are the status codes whose request series exist at 0
// for every route.
var precreatedCodes = []string{"500", "503"}

// HTTPRequest counts one answered API request (api.Observer): route is
// its pattern, code its status; a route not set with SetHTTPRoutes counts
// as "other", a code outside 100–599 as "other".
func (m *Metrics) HTTPRequest(route string, code int, elapsed time.Duration) {
	if set := m.routes.Load(); set == nil || !(*set)[route] {
		route = routeOther
	}
	c := other
	if code >= 100 && code <= 599 {
		c = strconv.Itoa(code)
	}
	m.httpRequests.WithLabelValues(route, c).Inc()
	m.httpDuration.WithLabelValues(route).Observe(max(elapsed.Seconds(), 0))
}

// AlertmanagerNotification counts one outcome of the Alertmanager receiver
// for agent (api.Observer): accepted, duplicate, rejected or truncated
// (truncated notifications are counted as accepted too). Agents not
// configured are not counted (agent_worker_events_dropped_total
// {reason="unconfigured"}), nor is any other outcome.
func (m *Metrics) AlertmanagerNotification(agent, outcome string) {
	if m.agents.get(agent) == nil {
		m.drops.unconfigured.Add(1)
		return
	}
	if oneOf(outcome, alertmanagerOutcomes) == other {
		return
	}
	m.amNotifications.WithLabelValues(agent, outcome).Inc()
}
