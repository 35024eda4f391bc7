package control

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/agent-worker/agent-worker/approval"
	"github.com/agent-worker/agent-worker/driver"
)

// approvalTimeout bounds the store calls of an approval verb.
const approvalTimeout = 10 * time.Second

// approvalVerb lists the agent's pending approvals or decides one on its
// owner. approve answers 202: the decision is taken, the call runs in the
// background and the agent is woken with its result; deny answers 200. An
// unknown id (decided already, expired, never held) is 404.
func approvalVerb(r Reply, a *driver.Agent, req Request) Reply {
	ctx, cancel := context.WithTimeout(context.Background(), approvalTimeout)
	defer cancel()
	if req.Verb == VerbApprovals {
		list, err := a.Approvals(ctx)
		if err != nil {
			return r.fail(http.StatusServiceUnavailable, "pending approvals of agent %q: %v", a.Name(), err)
		}
		if list == nil {
			list = []approval.Request{}
		}
		return r.result(http.StatusOK, list)
	}
	if req.ApprovalID == "" {
		return r.fail(http.StatusBadRequest, "%s needs approval_id", req.Verb)
	}
	approve := req.Verb == VerbApprove
	got, err := a.Decide(ctx, req.ApprovalID, approve, req.Audit())
	switch {
	case errors.Is(err, approval.ErrUnknown):
		return r.fail(http.StatusNotFound, "%v (decided already, expired, or never held); list them with GET /v1/agents/%s/approvals", err, a.Name())
	case errors.Is(err, driver.ErrNotOwner):
		return r.fail(http.StatusServiceUnavailable, "%v", err)
	case err != nil:
		return r.fail(http.StatusServiceUnavailable, "decide approval %q of agent %q: %v", req.ApprovalID, a.Name(), err)
	}
	decision, code := driver.DecisionDenied, http.StatusOK
	if approve {
		decision, code = driver.DecisionApproved, http.StatusAccepted
	}
	return r.result(code, struct {
		Decision string           `json:"decision"`
		Request  approval.Request `json:"request"`
	}{decision, got})
}
