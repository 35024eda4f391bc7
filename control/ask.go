package control

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/outage"
)

// VerbAsk answers an operator's side question (Request.Question) on the
// agent's owner, from the agent's current context, without a turn and
// without adding to its history: driver.Agent.Ask. It is audited: the
// owner's asked event and log line name the caller (by).
const VerbAsk = "ask"

// AskAnswer is the result of an answered ask (200): the owner's answer
// and the replica that gave it.
type AskAnswer struct {
	driver.Answer
	Owner string `json:"owner"`
}

// AskRefusal is the result of a refused ask (409): why, and — when a
// guardrail refused it (the agent is halted, or the call would reach a
// ceiling) — which, with the owner's numbers. Nothing was spent.
type AskRefusal struct {
	Error string `json:"error"`
	*guard.CeilingError
}

// forwardTimeout is how long Do waits for the owner's reply to verb: an
// ask's answer may take AskTimeout more than any other verb.
func (c *Control) forwardTimeout(verb string) time.Duration {
	if verb == VerbAsk {
		return c.o.Timeout + c.o.AskTimeout
	}
	return c.o.Timeout
}

// ask answers req.Question on the owner, within AskTimeout and ctx: 200
// AskAnswer; 400 an empty or too long question; 409 AskRefusal (halted,
// a ceiling, another ask running, stopped); 502 the model call failed;
// 503 not the owner, a dependency down or the worker shutting down
// (retry); 504 no answer in time.
func (c *Control) ask(ctx context.Context, r Reply, a *driver.Agent, req Request) Reply {
	ctx, cancel := context.WithTimeout(ctx, c.o.AskTimeout)
	defer cancel()
	ans, err := a.Ask(ctx, req.Audit(), req.Question)
	var ceiling *guard.CeilingError
	switch {
	case err == nil:
		return r.result(http.StatusOK, AskAnswer{Answer: ans, Owner: c.o.Holder})
	case errors.Is(err, driver.ErrNoQuestion), errors.Is(err, driver.ErrLongQuestion):
		return r.fail(http.StatusBadRequest, `"question": %v`, err)
	case errors.As(err, &ceiling):
	case errors.Is(err, hook.ErrHalted):
		ceiling = c.haltedBy(a.Name(), err)
	case errors.Is(err, driver.ErrAskBusy), errors.Is(err, driver.ErrStopped):
	case errors.Is(err, driver.ErrAskTimeout):
		return r.fail(http.StatusGatewayTimeout, "%v (within %s)", err, c.o.AskTimeout)
	case errors.Is(err, driver.ErrNotOwner), errors.Is(err, driver.ErrShutdown), outage.Is(err), ctx.Err() != nil:
		return r.fail(http.StatusServiceUnavailable, "%v; retry", err)
	default:
		return r.fail(http.StatusBadGateway, "%v", err)
	}
	r = r.result(http.StatusConflict, AskRefusal{Error: err.Error(), CeilingError: ceiling})
	r.Error = err.Error()
	return r
}

// haltedBy names the guardrail that halted agent (the guard's trip), with
// its numbers; without a guard, or a trip it knows, only why.
func (c *Control) haltedBy(agent string, err error) *guard.CeilingError {
	ce := &guard.CeilingError{Reason: err.Error(), Tripped: true}
	if c.o.Guard == nil {
		return ce
	}
	if st, ok := c.o.Guard.Status(agent); ok && st.Trip != nil {
		ce.Guardrail, ce.SpentUSD, ce.CeilingUSD = st.Trip.Guardrail, st.Trip.Spent, st.Trip.Ceiling
	}
	return ce
}
