package api

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/guard"
)

// verb serves POST /v1/agents/{name}/{wake|pause|resume|interrupt}
// through control.Control.Do, so HTTP and the NATS control subject behave
// alike and the verb is carried out by the agent's owner, whichever
// replica was asked: the answer is the owner's control.Reply. A verb the
// owner's agent state refuses (wake of a paused or halted agent, resume of
// a stopped one or of one that is not paused: its reply's "state" says
// what it is) is 409 with the reply, whose "error" says why; no owner
// answering is 503.
//
// Every verb takes an optional {"reason"} (at most control.MaxReason
// runes; longer is 400) and is carried out on behalf of the caller's
// token name (control.Request.By), which the owner's events, and a
// pause's stored record, name as who asked — also when another replica
// answered the request. Resume also takes {"drop_queued": true}: the
// queued messages are abandoned first (dead-lettered with reason
// operator_dropped) and the reply's "dropped" counts them.
func (s *Server) verb(verb string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a, ok := s.agent(w, r)
		if !ok {
			return
		}
		var body struct {
			Message    string `json:"message"`
			Hold       *bool  `json:"hold"`
			DropQueued bool   `json:"drop_queued"`
			Reason     string `json:"reason"`
		}
		// Each verb takes its own fields (and reason); any other is 400.
		var fields any
		switch verb {
		case control.VerbWake:
			fields = &struct {
				Message *string `json:"message"`
				Reason  *string `json:"reason"`
			}{&body.Message, &body.Reason}
		case control.VerbResume:
			fields = &struct {
				Message    *string `json:"message"`
				DropQueued *bool   `json:"drop_queued"`
				Reason     *string `json:"reason"`
			}{&body.Message, &body.DropQueued, &body.Reason}
		case control.VerbInterrupt:
			fields = &struct {
				Hold   **bool  `json:"hold"`
				Reason *string `json:"reason"`
			}{&body.Hold, &body.Reason}
		default:
			fields = &struct {
				Reason *string `json:"reason"`
			}{&body.Reason}
		}
		if !s.decode(w, r, fields, false) {
			return
		}
		reason, ok := operatorReason(w, r, body.Reason)
		if !ok {
			return
		}
		req := control.Request{Verb: verb, Message: strings.TrimSpace(body.Message), Hold: body.Hold,
			DropQueued: body.DropQueued, By: record(r).who.Name, Reason: reason}
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
		if reply.Dropped != nil {
			rec.result += fmt.Sprintf(", %d queued message(s) dropped", *reply.Dropped)
		}
		writeJSON(w, reply.Status(), reply)
	}
}

// operatorReason checks an operator's reason: trimmed, at most
// control.MaxReason runes (else 400).
func operatorReason(w http.ResponseWriter, r *http.Request, reason string) (string, bool) {
	reason = strings.TrimSpace(reason)
	if n := utf8.RuneCountInString(reason); n > control.MaxReason {
		fail(w, r, http.StatusBadRequest, `"reason" is %d characters long; at most %d are kept`, n, control.MaxReason)
		return "", false
	}
	return reason, true
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
// come back as the owner answered them. An optional "reason" and the
// caller's token name go into the owner's guardrail-reset event.
func (s *Server) resetGuardrail(w http.ResponseWriter, r *http.Request) {
	a, ok := s.agent(w, r)
	if !ok {
		return
	}
	var body struct {
		Guardrail    string  `json:"guardrail"`
		AddBudgetUSD float64 `json:"add_budget_usd"`
		Reason       string  `json:"reason"`
	}
	if !s.decode(w, r, &body, true) {
		return
	}
	reason, ok := operatorReason(w, r, body.Reason)
	if !ok {
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
	reply, err := s.ctl.Do(r.Context(), a.Name(), control.Request{Verb: control.VerbReset, Guardrail: body.Guardrail, AddBudgetUSD: body.AddBudgetUSD,
		By: record(r).who.Name, Reason: reason})
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
		s.doVerb(w, r, a.Name(), control.Request{Verb: verb, By: record(r).who.Name}, nil)
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
// request's result (the audit log line; done nil: a read, not logged).
func (s *Server) doVerb(w http.ResponseWriter, r *http.Request, agent string, req control.Request, done func(control.Reply) string) {
	reply, err := s.ctl.Do(r.Context(), agent, req)
	if err != nil {
		noOwner(w, r, err)
		return
	}
	replyBody(w, r, reply)
	if reply.OK && done != nil {
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
