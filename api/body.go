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

// readBody reads a write's body: 415 unless a non-empty body is
// application/json, 413 beyond limit, 503 when the in-flight bytes it
// would reserve are not free (reserveBody). what names the body and key
// the setting of the limit in the 413 answer. On false the answer is
// written.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, limit int64, what, key string) ([]byte, bool) {
	if r.ContentLength > 0 && !isJSON(r.Header.Get("Content-Type")) {
		fail(w, r, http.StatusUnsupportedMediaType, "a request body must be Content-Type: application/json; got %q", r.Header.Get("Content-Type"))
		return nil, false
	}
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
	if len(data) > 0 && !isJSON(r.Header.Get("Content-Type")) {
		fail(w, r, http.StatusUnsupportedMediaType, "a request body must be Content-Type: application/json; got %q", r.Header.Get("Content-Type"))
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
