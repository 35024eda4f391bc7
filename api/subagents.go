package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/agent-worker/agent-worker/background"
)

// The subagent routes:
//
//	route                                           role          answer
//	GET  /v1/agents/{name}/subagents                read|operate  {"agent","running","queued","subagents": [background.Info...]}
//	POST /v1/agents/{name}/subagents/{id}/stop      operate       → 202 {"id","status":"stopping"}; 404 unknown; 409 finished
//
// Both are served from any replica: with JetStream the list is the
// parent's registry in the store (every subagent's state, the replica
// running it, when it started and what it has cost its parent), and a
// stop is recorded there and announced over NATS to whichever replica
// runs the subagent, which stops it and reports "stopped by operator
// (token <name>)" to the parent. Without JetStream both act on this
// process's subagents.

// Subagents serves the subagent routes; background.Manager is one. The
// server finds it in Options.Subagents (the worker's subagent manager);
// without one, the routes answer 404.
type Subagents interface {
	List(ctx context.Context, parent string) ([]background.Info, error)
	StopBy(ctx context.Context, parent, id, by string) error
	Running(parent string) int
}

// SubagentList is the answer of GET /v1/agents/{name}/subagents.
type SubagentList struct {
	Agent string `json:"agent"`
	// Running counts the subagents running, on any replica; Queued those
	// waiting for a replica with room. Both count against the agent's
	// subagents.max.
	Running   int               `json:"running"`
	Queued    int               `json:"queued"`
	Subagents []background.Info `json:"subagents"`
}

// subagents returns the server's subagent manager, or answers 404.
func (s *Server) subagents(w http.ResponseWriter, r *http.Request, agent string) (Subagents, bool) {
	if src, ok := s.o.Subagents.(Subagents); ok && src != nil {
		return src, true
	}
	fail(w, r, http.StatusNotFound, "agent %q has no subagents: this worker runs none", agent)
	return nil, false
}

// listSubagents serves GET /v1/agents/{name}/subagents.
func (s *Server) listSubagents(w http.ResponseWriter, r *http.Request) {
	a, ok := s.agent(w, r)
	if !ok {
		return
	}
	src, ok := s.subagents(w, r, a.Name())
	if !ok {
		return
	}
	list, err := src.List(r.Context(), a.Name())
	if err != nil {
		subagentError(w, r, a.Name(), err)
		return
	}
	if list == nil {
		list = []background.Info{}
	}
	out := SubagentList{Agent: a.Name(), Subagents: list}
	for _, i := range list {
		switch i.State {
		case background.StateRunning:
			out.Running++
		case background.StateQueued:
			out.Queued++
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// stopSubagent serves POST /v1/agents/{name}/subagents/{id}/stop.
func (s *Server) stopSubagent(w http.ResponseWriter, r *http.Request) {
	a, ok := s.agent(w, r)
	if !ok {
		return
	}
	var body struct{}
	if !s.decode(w, r, &body, false) {
		return
	}
	src, ok := s.subagents(w, r, a.Name())
	if !ok {
		return
	}
	id := r.PathValue("id")
	rec := record(r)
	if err := src.StopBy(r.Context(), a.Name(), id, "operator (token "+rec.who.Name+")"); err != nil {
		subagentError(w, r, a.Name(), err)
		return
	}
	rec.result = "stop requested for subagent " + id
	writeJSON(w, http.StatusAccepted, struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}{id, "stopping"})
}

// subagentError answers a subagent manager's error: 404 for an agent
// without subagents or an unknown subagent, 409 for one already finished,
// 503 otherwise (the store or NATS unavailable).
func subagentError(w http.ResponseWriter, r *http.Request, agent string, err error) {
	switch {
	case errors.Is(err, background.ErrNotParent):
		fail(w, r, http.StatusNotFound, "agent %q has no subagents (it is not granted spawn_subagent)", agent)
	case errors.Is(err, background.ErrUnknown):
		fail(w, r, http.StatusNotFound, "agent %q: %v", agent, err)
	case errors.Is(err, background.ErrFinished):
		fail(w, r, http.StatusConflict, "agent %q: %v", agent, err)
	default:
		fail(w, r, http.StatusServiceUnavailable, "agent %q: subagents unavailable: %v", agent, err)
	}
}
