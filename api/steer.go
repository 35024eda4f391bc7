package api

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/driver"
)

// steerMessage serves a message posted with "steer": true: text is
// operator text for the agent's running turn (control.VerbSteer, carried
// out by the agent's owner), so it needs what the steer verb needs
// (role operate), not what queueing a message needs (ingest) — 403
// otherwise. It takes no id, from, attributes or wake: it is the
// operator's own words, not a message in the input log, and lives in the
// owner's memory until a turn shows it (see driver.Agent.Steer). The
// answer is the owner's: 202 with driver.Steered — status "steered" and
// the running turn that takes it before its next model call, or status
// "woke" when no turn ran and it woke the agent as an operator message;
// 409 with its reason when the owner refuses (a paused, halted or stopped
// agent); 503 when no owner answered.
func (s *Server) steerMessage(w http.ResponseWriter, r *http.Request, a *driver.Agent, text string) {
	rec := record(r)
	if need := control.Need(control.VerbSteer); !need.Allows(rec.who.Role) {
		fail(w, r, http.StatusForbidden, "token %q has role %q; a steered message is operator text and needs role %s", rec.who.Name, rec.who.Role, need.Roles())
		return
	}
	req := control.Request{Verb: control.VerbSteer, Message: text, By: rec.who.Name}
	s.doVerb(w, r, a.Name(), req, func(reply control.Reply) string {
		var st driver.Steered
		_ = json.Unmarshal(reply.Result, &st)
		if st.Woke {
			return fmt.Sprintf("steer %s woke the agent on %s", st.ID, reply.Owner)
		}
		return fmt.Sprintf("steered %s into turn %d on %s", st.ID, st.Turn, reply.Owner)
	})
}
