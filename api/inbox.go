package api

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/driver"
)

// listInbox serves GET /v1/agents/{name}/inbox: the messages queued for
// the agent on its owner (control.Inbox: ids, kinds, sources, senders,
// sizes, ages, oldest first; never their text), whichever replica is
// asked; 503 when no replica owns the agent right now. What a resume runs
// — or, with {"drop_queued": true}, abandons.
func (s *Server) listInbox(w http.ResponseWriter, r *http.Request) {
	a, ok := s.agent(w, r)
	if !ok {
		return
	}
	reply, err := s.ctl.Do(r.Context(), a.Name(), control.Request{Verb: control.VerbInbox, By: record(r).who.Name})
	if err != nil {
		noOwner(w, r, err)
		return
	}
	if !reply.OK {
		fail(w, r, reply.Status(), "%s", reply.Error)
		return
	}
	var in control.Inbox
	if err := json.Unmarshal(reply.Result, &in); err != nil {
		fail(w, r, http.StatusBadGateway, "%v", fmt.Errorf("the inbox of agent %q from its owner %q is not an inbox listing: %w", a.Name(), reply.Owner, err))
		return
	}
	if in.Messages == nil {
		in.Messages = []driver.QueuedMessage{}
	}
	writeJSON(w, http.StatusOK, in)
}
