package api

import (
	"maps"
	"net/http"
	"slices"

	"github.com/agent-worker/agent-worker/access"
	"github.com/agent-worker/agent-worker/control"
)

// route is one endpoint of the API, the one place that says what it
// needs: authorise reads need, the write log action, Routes and the
// Observer the pattern. Every endpoint is registered from a route, so no
// handler can be reachable without a need.
type route struct {
	pattern string      // "METHOD /path", as http.ServeMux takes it
	need    access.Need // the roles that may use it (403 for others)
	action  string      // a write's name in the write log; "" for reads
	handler http.HandlerFunc
}

// readRoute is a route any role that may read may use.
func readRoute(pattern string, h http.HandlerFunc) route {
	return route{pattern: pattern, need: access.Read, handler: h}
}

// writeRoute is a route that changes something: it has an action name
// for the write log and needs need (operate, or ingest for the routes
// that only queue messages).
func writeRoute(pattern, action string, need access.Need, h http.HandlerFunc) route {
	return route{pattern: pattern, need: need, action: action, handler: h}
}

// verbRoute is pattern ("METHOD /path"), served by h through the control
// verb verb: the route needs what the verb needs over NATS
// (control.Need), from the one table of it. A write route has an action
// name for the write log.
func verbRoute(pattern, action, verb string, h http.HandlerFunc) route {
	return route{pattern: pattern, need: control.Need(verb), action: action, handler: h}
}

// routes lists every endpoint. Queueing a message (messages, the
// Alertmanager receiver, webhooks) is all an ingest token may do.
func (s *Server) routes() []route {
	rs := []route{
		readRoute("GET /healthz", s.healthz),
		readRoute("GET /readyz", s.readyz),
		readRoute("GET /metrics", s.metrics),
		readRoute("GET /{$}", s.statusPage),
		readRoute("GET /v1/replicas", s.listReplicas),
		readRoute("GET /v1/agents", s.listAgents),
		verbRoute("GET /v1/agents/{name}", "", control.VerbView, s.getAgent),
		readRoute("GET /v1/agents/{name}/events", s.agentEvents),
		readRoute("GET /v1/events", s.allEvents),
		writeRoute("POST /v1/agents/{name}/messages", "message", access.Ingest, s.postMessage),
	}
	for _, verb := range []string{control.VerbWake, control.VerbPause, control.VerbResume, control.VerbInterrupt} {
		rs = append(rs, verbRoute("POST /v1/agents/{name}/"+verb, verb, verb, s.verb(verb)))
	}
	rs = append(rs,
		verbRoute("POST /v1/agents/{name}/guardrails/reset", "guardrail-reset", control.VerbReset, s.resetGuardrail),
		verbRoute("POST /v1/agents/{name}/schedules/{schedule}/run", "schedule-run", control.VerbRunSchedule, s.runSchedule),
		readRoute("GET /v1/agents/{name}/subagents", s.listSubagents),
		readRoute("GET /v1/agents/{name}/turns", s.listTurns),
		verbRoute("GET /v1/agents/{name}/messages/{id}", "", control.VerbMessage, s.getMessage),
		verbRoute("GET /v1/agents/{name}/inbox", "", control.VerbInbox, s.listInbox),
		writeRoute("POST /v1/agents/{name}/subagents/{id}/stop", "subagent-stop", access.Operate, s.stopSubagent),
		writeRoute(alertmanagerRoute, "alertmanager", access.Ingest, s.postAlertmanager),
		writeRoute("POST /v1/reload", "reload", access.Operate, s.reload), // reload.go
		writeRoute(webhookRoute, "webhook", access.Ingest, s.postWebhook),
		s.askRoute(), // ask.go
		s.modelRoute(),
		s.scriptRoute(),
	)
	rs = append(rs, s.memoryRoutes()...)
	rs = append(rs, s.approvalRoutes()...)
	rs = append(rs, s.deadLetterRoutes()...)
	rs = append(rs, s.sessionRoutes()...)
	return rs
}

// register serves each route on the mux and records it in the table
// the middleware reads (authorise, the write log, Routes, observe).
func (s *Server) register(rs []route) {
	for _, rt := range rs {
		s.mux.HandleFunc(rt.pattern, rt.handler)
		s.table[rt.pattern] = rt
	}
}

// alertmanagerRoute is the receiver's route pattern.
const alertmanagerRoute = "POST /v1/alertmanager/{name}"

// Routes returns the route patterns ("GET /v1/agents/{name}", "POST
// /v1/alertmanager/{name}", ...), sorted: the route values the Observer
// is told besides RouteOther.
func (s *Server) Routes() []string {
	return slices.Sorted(maps.Keys(s.table))
}
