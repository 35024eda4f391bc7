package api

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/driver"
)

// steered is the answer to a message posted with "steer": true: 202 with
// status "steered" and the running turn that takes it before its next
// model call, or status "woke" when no turn ran and it woke the agent as
// an operator message.
type steered struct {
	Status string `json:"status"`
	ID     string `json:"id"`
	Turn   uint64 `json:"turn,omitempty"`
	Woke   bool   `json:"woke,omitempty"`
	Owner  string `json:"owner,omitempty"`
}

// steerMessage serves a message posted with "steer": true: text is
// operator text for the agent's running turn (control.VerbSteer, carried
// out by the agent's owner), so it needs what the steer verb needs
// (role operate), not what queueing a message needs (ingest) — 403
// otherwise. It takes no id, from, attributes or wake: it is the
// operator's own words, not a message in the input log, and lives in the
// owner's memory until a turn shows it (see driver.Agent.Steer). The
// owner's refusal (a paused, halted or stopped agent) comes back as 409
// with its reason; no owner answering is 503.
func (s *Server) steerMessage(w http.ResponseWriter, r *http.Request, a *driver.Agent, text string) {
	rec := record(r)
	if need := control.Need(control.VerbSteer); !need.Allows(rec.who.Role) {
		fail(w, r, http.StatusForbidden, "token %q has role %q; a steered message is operator text and needs role %s", rec.who.Name, rec.who.Role, need.Roles())
		return
	}
	reply, err := s.ctl.Do(r.Context(), a.Name(), control.Request{Verb: control.VerbSteer, Message: text, By: rec.who.Name})
	if err != nil {
		noOwner(w, r, err)
		return
	}
	if !reply.OK {
		replyBody(w, r, reply)
		return
	}
	var st driver.Steered
	if err := json.Unmarshal(reply.Result, &st); err != nil {
		fail(w, r, http.StatusBadGateway, "the owner's steer reply: %v", err)
		return
	}
	out := steered{Status: "steered", ID: st.ID, Turn: st.Turn, Owner: reply.Owner}
	rec.result = fmt.Sprintf("steered %s into turn %d", st.ID, st.Turn)
	if st.Woke {
		out.Status, out.Woke = "woke", true
		rec.result = "steer " + st.ID + " woke the agent"
	}
	writeJSON(w, http.StatusAccepted, out)
}
