package api

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/guard"
)

// verb serves POST /v1/agents/{name}/{wake|pause|resume|interrupt} through
// control.Apply, so HTTP and the NATS control subject behave alike. A verb
// the agent's state refuses (wake of a paused or halted agent, resume of
// a stopped one) is 409 with the reply, whose "error" says why.
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
		reply := control.Apply(a, req)
		rec := record(r)
		if !reply.OK {
			rec.result = reply.Error
			writeJSON(w, http.StatusConflict, reply)
			return
		}
		rec.result = "state " + reply.State
		writeJSON(w, http.StatusOK, reply)
	}
}

// refusal is the 409 answer to a reset that would trip again at once.
type refusal struct {
	Error string `json:"error"`
	*guard.RefusedError
}

// resetGuardrail serves POST /v1/agents/{name}/guardrails/reset.
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
	if _, ok := s.guard.Status(a.Name()); !ok {
		fail(w, r, http.StatusNotFound, "agent %q has no guardrails", a.Name())
		return
	}
	res, err := s.guard.Reset(a.Name(), body.Guardrail, body.AddBudgetUSD)
	if refused, ok := errors.AsType[*guard.RefusedError](err); ok {
		record(r).result = err.Error()
		writeJSON(w, http.StatusConflict, refusal{Error: err.Error(), RefusedError: refused})
		return
	}
	if err != nil {
		// Unknown guardrail, a negative amount, budget for a guardrail
		// that takes none, or no ceiling configured: the request is wrong.
		fail(w, r, http.StatusBadRequest, "%v", err)
		return
	}
	record(r).result = "reset " + body.Guardrail
	writeJSON(w, http.StatusOK, res)
}

// runSchedule serves POST /v1/agents/{name}/schedules/{schedule}/run: the
// schedule fires now, as its cron would, through the agent's gate.
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
	if gate := a.Gate(); gate != "" {
		fail(w, r, http.StatusConflict, "agent %q is %s: the schedule was not run", a.Name(), gate)
		return
	}
	if err := s.sched.RunNow(a.Name(), name); err != nil {
		// The gate may have closed since the check; otherwise the
		// schedule is configured but disabled.
		if gate := a.Gate(); gate != "" {
			fail(w, r, http.StatusConflict, "agent %q is %s: the schedule was not run", a.Name(), gate)
			return
		}
		fail(w, r, http.StatusNotFound, "%v", err)
		return
	}
	record(r).result = "fired " + name
	resp := struct {
		Queued   bool       `json:"queued"`
		Agent    string     `json:"agent"`
		Schedule string     `json:"schedule"`
		NextFire *time.Time `json:"next_fire,omitempty"`
	}{Queued: true, Agent: a.Name(), Schedule: name}
	if next := s.sched.Next(a.Name(), name); !next.IsZero() {
		resp.NextFire = &next
	}
	writeJSON(w, http.StatusAccepted, resp)
}
