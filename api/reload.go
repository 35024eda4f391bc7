package api

import (
	"context"
	"errors"
	"net/http"
)

// POST /v1/reload re-reads the worker's config file and applies it
// (worker.Worker.ReloadConfig). It needs the operate role and a token
// scoped to every agent: a reload changes them all. Answers, in JSON:
//
//   - 200: applied, or unchanged (the token values are re-read either way):
//     the outcome, the config hashes and the agents added, removed and
//     changed.
//   - 422: the file is invalid: nothing changed; problems lists each as
//     "file:line: message".
//   - 409: the file changes keys read only at start (listen addresses,
//     store, stream, ...): nothing changed; problems names each key with
//     its file:line. 409, not 422: the file is valid on its own, it
//     conflicts with the running process, and a restart with it is the
//     way to apply it.
//   - 500: valid, but part of it could not be applied; the body says what
//     was (the reload can be asked again).

// Reload errors the Options.Reload func returns (wrapped) to choose the
// status.
var (
	// ErrReloadInvalid: the file does not load or validate (422).
	ErrReloadInvalid = errors.New("the config file is invalid")
	// ErrReloadRestart: the file changes keys that need a restart (409).
	ErrReloadRestart = errors.New("the config changes keys that need a restart")
)

// ReloadReport is POST /v1/reload's answer.
type ReloadReport struct {
	Outcome  string   `json:"outcome"` // applied, unchanged, refused, failed
	Hash     string   `json:"hash,omitempty"`
	Previous string   `json:"previous,omitempty"`
	Added    []string `json:"added"`
	Removed  []string `json:"removed"`
	Changed  []string `json:"changed"`
	Error    string   `json:"error,omitempty"`
	Problems []string `json:"problems,omitempty"`
}

// Reloader re-reads and applies the config on behalf of by (the token's
// name); the error wraps ErrReloadInvalid or ErrReloadRestart for a
// refusal, with the report's Problems filled.
type Reloader func(ctx context.Context, by string) (ReloadReport, error)

func (s *Server) reload(w http.ResponseWriter, r *http.Request) {
	who := record(r).who
	if len(who.Agents) > 0 {
		fail(w, r, http.StatusForbidden, "token %s is scoped to some agents; a reload changes every agent: use an unscoped operate token", who.Name)
		return
	}
	var body struct{} // a reload takes no options: a body with any is 400
	if !s.decode(w, r, &body, false) {
		return
	}
	if s.o.Reload == nil {
		fail(w, r, http.StatusNotImplemented, "this server cannot reload its config")
		return
	}
	rep, err := s.o.Reload(r.Context(), who.Name)
	status := http.StatusOK
	switch {
	case errors.Is(err, ErrReloadInvalid):
		status = http.StatusUnprocessableEntity
	case errors.Is(err, ErrReloadRestart):
		status = http.StatusConflict
	case err != nil:
		status = http.StatusInternalServerError
	}
	if err != nil {
		rep.Error = err.Error()
		record(r).result = err.Error()
	}
	writeJSON(w, status, rep)
}
