package api

import (
	"net/http"

	"github.com/agent-worker/agent-worker/control"
)

// memoryRoutes are the running memory's routes: GET shows it (the
// owner's driver.MemoryView — the text, its tokens estimate and bound, the
// turns folded (and through which turn), when it was updated, the last
// error, how many turns wait to be folded and when a failed fold is
// retried), POST .../memory/compact folds every turn not yet folded,
// DELETE clears it.
// Each goes to the agent's owner (control's memory verbs), whichever
// replica was asked; GET needs role read, the others operate.
func (s *Server) memoryRoutes() []route {
	return []route{
		verbRoute("GET /v1/agents/{name}/memory", "", control.VerbMemory, s.ownerRead(control.VerbMemory)),
		verbRoute("POST /v1/agents/{name}/memory/compact", "memory-compact", control.VerbMemoryCompact, s.memoryVerb(control.VerbMemoryCompact)),
		verbRoute("DELETE /v1/agents/{name}/memory", "memory-clear", control.VerbMemoryClear, s.memoryVerb(control.VerbMemoryClear)),
	}
}

// ownerRead serves a GET of the agent's owner's answer to a read verb
// (approvals, memory), asked on behalf of the caller's token name,
// whichever replica was asked: the owner's reply as replyBody gives it,
// 503 when no owner answered.
func (s *Server) ownerRead(verb string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a, ok := s.agent(w, r)
		if !ok {
			return
		}
		reply, err := s.ctl.Do(r.Context(), a.Name(), control.Request{Verb: verb, By: record(r).who.Name})
		if err != nil {
			noOwner(w, r, err)
			return
		}
		replyBody(w, r, reply)
	}
}

// memoryVerb serves POST /v1/agents/{name}/memory/compact (202: the fold
// of every turn not yet folded is queued on the owner and runs as soon as
// no turn does; 409 when the memory is off or the agent halted) and
// DELETE /v1/agents/{name}/memory (200: cleared). Both take an optional
// {"reason"} and act on behalf of the caller's token name: a clear's
// memory-cleared event names both. The answer is the owner's
// driver.MemoryView, or {"error"}.
func (s *Server) memoryVerb(verb string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.reasonedVerb(w, r, control.Request{Verb: verb}, func(reply control.Reply) string {
			if verb == control.VerbMemoryClear {
				return "memory cleared on " + reply.Owner
			}
			return "memory fold queued on " + reply.Owner
		})
	}
}

// reasonedVerb serves a verb that takes an optional {"reason"}: it checks
// the body and the reason, sends req to the agent's owner on behalf of the
// caller's token (By, Reason filled in), answers with the owner's reply,
// and on success records done(reply) as the request's result (the audit
// log line).
func (s *Server) reasonedVerb(w http.ResponseWriter, r *http.Request, req control.Request, done func(control.Reply) string) {
	a, ok := s.agent(w, r)
	if !ok {
		return
	}
	reason, ok := s.bodyReason(w, r)
	if !ok {
		return
	}
	req.By, req.Reason = record(r).who.Name, reason
	s.doVerb(w, r, a.Name(), req, done)
}

// doVerb sends req to the agent's owner, answers with the owner's reply
// (503 when no owner answered), and on success records done(reply) as the
// request's result (the audit log line).
func (s *Server) doVerb(w http.ResponseWriter, r *http.Request, agent string, req control.Request, done func(control.Reply) string) {
	reply, err := s.ctl.Do(r.Context(), agent, req)
	if err != nil {
		noOwner(w, r, err)
		return
	}
	replyBody(w, r, reply)
	if reply.OK {
		record(r).result = done(reply)
	}
}

// bodyReason reads an optional {"reason"} body and checks the reason; on
// false it has answered.
func (s *Server) bodyReason(w http.ResponseWriter, r *http.Request) (string, bool) {
	var body struct {
		Reason string `json:"reason"`
	}
	if !s.decode(w, r, &body, false) {
		return "", false
	}
	return operatorReason(w, r, body.Reason)
}
