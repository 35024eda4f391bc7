package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/money"
)

// askRoute is POST /v1/agents/{name}/ask: the control verb ask, so it
// needs what the verb needs over NATS (operate: an ask spends the
// agent's budget).
func (s *Server) askRoute() route {
	return verbRoute("POST /v1/agents/{name}/ask", "ask", control.VerbAsk, s.ask)
}

// ask serves POST /v1/agents/{name}/ask {"question"}: the agent's owner,
// whichever replica was asked, answers the operator's side question from
// the agent's current context with one model call — no turn, nothing
// added to its history — on behalf of the caller's token name (the
// owner's asked event and this server's write log name it). 200 is
// control.AskAnswer: {"answer", "model", "tokens_in", "tokens_out",
// "cost_usd", "history_turns", "calls_not_run", "duration_ms", "agent",
// "owner"}. 400 no question, or one longer than driver.MaxQuestionBytes;
// 409 control.AskRefusal naming the guardrail when the agent is halted or
// the ask would reach a ceiling (or another ask runs); 502 the model
// failed; 503 no owner; 504 no answer within the owner's ask timeout.
func (s *Server) ask(w http.ResponseWriter, r *http.Request) {
	a, ok := s.agent(w, r)
	if !ok {
		return
	}
	var body struct {
		Question string `json:"question"`
	}
	if !s.decode(w, r, &body, true) {
		return
	}
	question := strings.TrimSpace(body.Question)
	switch {
	case question == "":
		fail(w, r, http.StatusBadRequest, `"question" is required: what you want the agent to answer`)
		return
	case len(question) > driver.MaxQuestionBytes:
		fail(w, r, http.StatusBadRequest, `"question" is %d bytes long; at most %d are taken`, len(question), driver.MaxQuestionBytes)
		return
	}
	req := control.Request{Verb: control.VerbAsk, Question: question, By: record(r).who.Name}
	s.doVerb(w, r, a.Name(), req, func(reply control.Reply) string {
		var ans control.AskAnswer
		_ = json.Unmarshal(reply.Result, &ans)
		return fmt.Sprintf("answered on %s by %s: %d+%d tokens, %s", reply.Owner, ans.Model, ans.TokensIn, ans.TokensOut, money.USD(ans.CostUSD))
	})
}
