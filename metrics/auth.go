package metrics

import "github.com/prometheus/client_golang/prometheus"

// newAuthFailures makes agent_worker_auth_failures_total. Its route label
// is bounded as the request series' are (SetHTTPRoutes), which creates
// its series at 0.
func newAuthFailures() *prometheus.CounterVec {
	return counter("auth_failures_total",
		"Failed authentications of the operator API, by route pattern (\"POST /login\" for the login form; \"other\" for a path no route matched): a bearer token, session cookie or login token that did not verify. Not counted: requests without a credential, and those of a client throttled after too many failures (answered 429 without a check).",
		"route")
}

// AuthFailure counts one failed authentication of the operator API
// (api.Observer): route is the request's pattern, "other" outside the
// routes set with SetHTTPRoutes.
func (m *Metrics) AuthFailure(route string) {
	if set := m.routes.Load(); set == nil || !(*set)[route] {
		route = routeOther
	}
	m.authFailures.WithLabelValues(route).Inc()
}
