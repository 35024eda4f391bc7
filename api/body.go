package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
)

// errorBody is every error answer.
type errorBody struct {
	Error string `json:"error"`
}

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		data, _ = json.Marshal(errorBody{Error: "encode response: " + err.Error()})
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}

// fail answers {"error": ...} with status and notes the error for the
// write log.
func fail(w http.ResponseWriter, r *http.Request, status int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	record(r).result = msg
	writeJSON(w, status, errorBody{Error: msg})
}

// isJSON reports whether a Content-Type is application/json (parameters
// such as charset allowed).
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// jsonOrNothing answers 415 and returns false unless a write takes JSON
// or nothing: a Content-Type, when sent, must be application/json
// (parameters such as charset allowed), and a body (a Content-Length
// above 0, or chunked) needs one. A write with neither body nor
// Content-Type passes: the routes whose body is optional take it as
// empty, the others answer 400. serveHTTP checks every write here,
// before its handler, whether or not the route reads a body (POST
// /v1/reload reads none), so a form or a text/plain post — what another
// site's page can send without asking — never reaches a handler. The
// session routes (POST /login, /logout) take the login form instead and
// are not checked here.
func jsonOrNothing(w http.ResponseWriter, r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	switch {
	case ct != "" && !isJSON(ct):
		fail(w, r, http.StatusUnsupportedMediaType, "a request body must be Content-Type: application/json; got %q", logSafe(ct))
	case ct == "" && r.ContentLength != 0:
		fail(w, r, http.StatusUnsupportedMediaType, "a request with a body needs Content-Type: application/json")
	default:
		return true
	}
	return false
}

// readBody reads a write's body (serveHTTP has checked it is JSON or
// absent: jsonOrNothing): 413 beyond limit, 503 when the in-flight bytes
// it would reserve are not free (reserveBody). what names the body and
// key the setting of the limit in the 413 answer. On false the answer is
// written.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, limit int64, what, key string) ([]byte, bool) {
	if r.ContentLength > limit {
		fail(w, r, http.StatusRequestEntityTooLarge, "%s is %d bytes; the limit is %d%s", what, r.ContentLength, limit, key)
		return nil, false
	}
	if !s.reserveBody(w, r, limit) {
		return nil, false
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
		fail(w, r, http.StatusRequestEntityTooLarge, "%s is over the limit of %d bytes%s", what, mbe.Limit, key)
		return nil, false
	}
	if err != nil {
		fail(w, r, http.StatusBadRequest, "read request body: %v", err)
		return nil, false
	}
	return data, true
}

// decode reads a write's JSON object body into v, strictly: unknown
// fields and trailing data are errors (400), so a misspelt option is not
// silently ignored. An empty body leaves v as it is, unless required.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any, required bool) bool {
	data, ok := s.readBody(w, r, s.o.MaxBody, "request body", "")
	if !ok {
		return false
	}
	if len(bytes.TrimSpace(data)) == 0 {
		if required {
			fail(w, r, http.StatusBadRequest, "a JSON body is required")
			return false
		}
		return true
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		fail(w, r, http.StatusBadRequest, "bad JSON body: %v", err)
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		fail(w, r, http.StatusBadRequest, "bad JSON body: more than one JSON value")
		return false
	}
	return true
}
