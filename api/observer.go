package api

import (
	"net/http"
	"strings"
	"time"
)

// RouteOther is the route reported to the Observer for a request no route
// matched (404, 405, a redirect to a cleaned path).
const RouteOther = "other"

// Outcomes of an Alertmanager notification, as reported to the Observer
// (agent_worker_alertmanager_notifications_total{outcome}).
const (
	// OutcomeAccepted: queued (202).
	OutcomeAccepted = "accepted"
	// OutcomeDuplicate: recognised as already queued or handled (200);
	// nothing was queued.
	OutcomeDuplicate = "duplicate"
	// OutcomeRejected: a 4xx answer (bad body, too large, unauthorized or
	// forbidden) to a request naming a configured agent.
	OutcomeRejected = "rejected"
	// OutcomeTruncated: queued with alerts left out to fit one message;
	// counted in addition to OutcomeAccepted.
	OutcomeTruncated = "truncated"
)

// Observer is told about requests, for metrics; metrics.Metrics is one.
// Its methods are called once a request is answered and must not block.
type Observer interface {
	// HTTPRequest reports one answered request: route is the pattern that
	// matched ("POST /v1/alertmanager/{name}", one of Server.Routes) or
	// RouteOther; code is the status; elapsed runs from the request's
	// arrival to the end of its answer (of the stream, for event streams).
	HTTPRequest(route string, code int, elapsed time.Duration)
	// AlertmanagerNotification reports the outcome of one request to the
	// Alertmanager receiver naming a configured agent; 5xx answers
	// (shutdown, NATS down, api.max_inflight_bytes: Alertmanager retries)
	// are not reported.
	AlertmanagerNotification(agent, outcome string)
	// WebhookNotification reports the outcome of one request to a
	// configured webhook (POST /v1/webhooks/{name}): the Alertmanager
	// receiver's outcomes and OutcomeTemplateError; 5xx answers are not
	// reported.
	WebhookNotification(webhook, outcome string)
	// AuthFailure reports one failed authentication: a credential that
	// did not verify (a bearer token, a session cookie, the login form's
	// token; not a request without any, nor one refused by the throttle
	// unchecked). route is the request's pattern (POST /login for the
	// login form) or RouteOther.
	AuthFailure(route string)
}

// observe reports an answered request to the Observer: its route and
// status and, for the Alertmanager receiver naming a configured agent,
// the notification's outcome. Route and agent labels stay bounded: a
// route is a pattern of ours or RouteOther, an agent a configured one.
func (s *Server) observe(r *http.Request, pattern string, rec *requestRecord, sw *statusWriter, began time.Time) {
	obs := s.o.Observer
	if obs == nil {
		return
	}
	status := sw.code()
	route := pattern
	if _, ours := s.table[pattern]; !ours {
		route = RouteOther
	}
	obs.HTTPRequest(route, status, time.Since(began))
	if route == webhookRoute {
		s.observeWebhook(obs, r, rec, status)
		return
	}
	if route != alertmanagerRoute {
		return
	}
	name, _ := strings.CutPrefix(r.URL.Path, "/v1/alertmanager/")
	if _, err := s.driver.Agent(name); err != nil {
		return // an unknown agent: its name is the client's, not ours
	}
	for _, o := range outcomes(status, rec.truncated) {
		obs.AlertmanagerNotification(name, o)
	}
}
