package api

import (
	"net/http"
	"slices"
	"strings"

	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/guard"
)

// verb serves POST /v1/agents/{name}/{wake|pause|resume|interrupt}
// through control.Control.Do, so HTTP and the NATS control subject behave
// alike and the verb is carried out by the agent's owner, whichever
// replica was asked: the answer is the owner's control.Reply. A verb the
// owner's agent state refuses (wake of a paused or halted agent, resume of
// a stopped one) is 409 with the reply, whose "error" says why; no owner
// answering is 503.
func (s *Server) verb(verb string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a, ok := s.agent(w, r)
		if !ok {
			return
		}
		req := control.Request{Verb: verb}
		switch verb {
		case control.VerbWake, control.VerbResume:
			var body struct {
				Message string `json:"message"`
			}
			if !s.decode(w, r, &body, false) {
				return
			}
			req.Message = strings.TrimSpace(body.Message)
		case control.VerbInterrupt:
			var body struct {
				Hold *bool `json:"hold"`
			}
			if !s.decode(w, r, &body, false) {
				return
			}
			req.Hold = body.Hold
		default:
			var body struct{}
			if !s.decode(w, r, &body, false) {
				return
			}
		}
		reply, err := s.ctl.Do(r.Context(), a.Name(), req)
		if err != nil {
			noOwner(w, r, err)
			return
		}
		rec := record(r)
		if !reply.OK {
			rec.result = reply.Error
			writeJSON(w, reply.Status(), reply)
			return
		}
		rec.result = "state " + reply.State + " on " + reply.Owner
		writeJSON(w, reply.Status(), reply)
	}
}

// noOwner answers 503 when no replica answered for the agent: its owner
// died and the lease has not moved yet, or NATS is out of reach. Nothing
// was done.
func noOwner(w http.ResponseWriter, r *http.Request, err error) {
	w.Header().Set("Retry-After", retryAfter)
	fail(w, r, http.StatusServiceUnavailable, "%v", err)
}

// replyBody answers with the owner's reply: its result (the verb's own
// answer: a guard.ResetResult, a control.Refusal, a control.ScheduleRun)
// under the reply's status, or {"error"} when it has none.
func replyBody(w http.ResponseWriter, r *http.Request, reply control.Reply) {
	if len(reply.Result) == 0 {
		fail(w, r, reply.Status(), "%s", reply.Error)
		return
	}
	record(r).result = reply.Error
	writeJSON(w, reply.Status(), reply.Result)
}

// resetGuardrail serves POST /v1/agents/{name}/guardrails/reset. The reset
// runs on the agent's owner, against the owner's ledger: its refusal (409
// with spent_usd, ceiling_usd, min_add_budget_usd) or its result (200)
// come back as the owner answered them.
func (s *Server) resetGuardrail(w http.ResponseWriter, r *http.Request) {
	a, ok := s.agent(w, r)
	if !ok {
		return
	}
	var body struct {
		Guardrail    string  `json:"guardrail"`
		AddBudgetUSD float64 `json:"add_budget_usd"`
	}
	if !s.decode(w, r, &body, true) {
		return
	}
	if body.Guardrail == "" {
		fail(w, r, http.StatusBadRequest, `"guardrail" is required: one of %s, %s, %s, %s, %s`, guard.Turn, guard.Session, guard.Daily, guard.WorkerDaily, guard.Watchdog)
		return
	}
	if s.guard == nil {
		fail(w, r, http.StatusNotFound, "this worker has no guardrails")
		return
	}
	reply, err := s.ctl.Do(r.Context(), a.Name(), control.Request{Verb: control.VerbReset, Guardrail: body.Guardrail, AddBudgetUSD: body.AddBudgetUSD})
	if err != nil {
		noOwner(w, r, err)
		return
	}
	replyBody(w, r, reply)
	if reply.OK {
		record(r).result = "reset " + body.Guardrail + " on " + reply.Owner
	}
}

// runSchedule serves POST /v1/agents/{name}/schedules/{schedule}/run: the
// schedule fires now on the agent's owner, as its cron would, through the
// agent's gate there.
func (s *Server) runSchedule(w http.ResponseWriter, r *http.Request) {
	a, ok := s.agent(w, r)
	if !ok {
		return
	}
	name := r.PathValue("schedule")
	if !slices.Contains(a.Schedules(), name) {
		fail(w, r, http.StatusNotFound, "agent %q has no schedule %q", a.Name(), name)
		return
	}
	var body struct{}
	if !s.decode(w, r, &body, false) {
		return
	}
	reply, err := s.ctl.Do(r.Context(), a.Name(), control.Request{Verb: control.VerbRunSchedule, Schedule: name})
	if err != nil {
		noOwner(w, r, err)
		return
	}
	replyBody(w, r, reply)
	if reply.OK {
		record(r).result = "fired " + name + " on " + reply.Owner
	}
}
