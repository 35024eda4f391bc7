package api

import "net/http"

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

// readyz answers 200, or 503 with the reasons.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if reasons := s.notReady(); len(reasons) > 0 {
		writeJSON(w, http.StatusServiceUnavailable, struct {
			Status  string   `json:"status"`
			Reasons []string `json:"reasons"`
		}{"not ready", reasons})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// metrics serves Options.Metrics, or 404 without one.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if s.o.Metrics == nil {
		fail(w, r, http.StatusNotFound, "this worker exports no metrics")
		return
	}
	s.o.Metrics.ServeHTTP(w, r)
}
