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
