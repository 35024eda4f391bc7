package api

import (
	"net/http"

	"github.com/agent-worker/agent-worker/control"
)

// approvalRoutes are the operator approval routes: GET lists the
// agent's pending approvals (role read; the owner's, oldest first:
// []approval.Request with id, tool, args, turn, requested, expires), POST
// .../approve and .../deny decide one (role operate, audited: the
// decision's event names the token and the reason). Each goes to the agent's owner, whichever
// replica was asked.
func (s *Server) approvalRoutes() []route {
	return []route{
		verbRoute("GET /v1/agents/{name}/approvals", "", control.VerbApprovals, s.ownerRead(control.VerbApprovals)),
		verbRoute("POST /v1/agents/{name}/approvals/{id}/approve", "approval-approve", control.VerbApprove, s.decideApproval(control.VerbApprove)),
		verbRoute("POST /v1/agents/{name}/approvals/{id}/deny", "approval-deny", control.VerbDeny, s.decideApproval(control.VerbDeny)),
	}
}

// decideApproval serves POST /v1/agents/{name}/approvals/{id}/approve
// (202: decided; the call runs with its stored arguments and the agent is
// woken with its result) and .../deny (200: the agent is told; the call
// never runs), each with an optional {"reason"}; 404 for an id that is
// not pending (decided, expired, never held).
func (s *Server) decideApproval(verb string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		s.reasonedVerb(w, r, control.Request{Verb: verb, ApprovalID: id}, func(reply control.Reply) string {
			return verb + "d " + id + " on " + reply.Owner
		})
	}
}
