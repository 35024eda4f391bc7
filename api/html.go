package api

import (
	"bytes"
	"html/template"
	"net/http"
)

// renderHTML answers status with t executed over data, under the
// Content-Security-Policy csp, never cached or sniffed. It renders into a
// buffer first, so a template that fails is a 500 JSON error (logged,
// naming what), never half a page.
func (s *Server) renderHTML(w http.ResponseWriter, r *http.Request, status int, t *template.Template, data any, csp, what string) {
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		s.log.Error("render "+what, "error", err)
		fail(w, r, http.StatusInternalServerError, "render %s: %v", what, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", csp)
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
