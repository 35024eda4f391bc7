package api

import (
	"net/http"
	"strings"
)

// healthz answers 200 while the process serves at all.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// notReady returns why the worker should get no traffic: Options.Ready's
// reasons, and "shutting down" after Shutdown.
func (s *Server) notReady() []string {
	var reasons []string
	if s.o.Ready != nil {
		reasons = append(reasons, s.o.Ready()...)
	}
	if s.draining.Load() {
		reasons = append(reasons, "shutting down")
	}
	return reasons
}

// readyz answers 200 (with what is degraded, if anything), or 503 with
// the reasons.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if reasons := s.notReady(); len(reasons) > 0 {
		writeJSON(w, http.StatusServiceUnavailable, struct {
			Status  string   `json:"status"`
			Reasons []string `json:"reasons"`
		}{"not ready", reasons})
		return
	}
	if s.o.Degraded != nil {
		if notes := s.o.Degraded(); len(notes) > 0 {
			writeJSON(w, http.StatusOK, struct {
				Status   string   `json:"status"`
				Degraded []string `json:"degraded"`
			}{"ready", notes})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// metrics serves Options.Metrics, or 404 without one. The metrics cover
// every agent, so a token limited to some agents gets 403 (an open
// /metrics is served to anyone).
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if who := record(r).who; len(who.Agents) > 0 {
		fail(w, r, http.StatusForbidden, "token %q is limited to agents %s, and /metrics covers every agent; scrape it with a token without agents, or add /metrics to api.open_paths", who.Name, strings.Join(who.Agents, ", "))
		return
	}
	if s.o.Metrics == nil {
		fail(w, r, http.StatusNotFound, "this worker exports no metrics")
		return
	}
	s.o.Metrics.ServeHTTP(w, r)
}
