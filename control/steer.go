package control

import (
	"errors"
	"net/http"
	"strings"

	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/hook"
)

// VerbSteer gives Request.Message, an operator's message, to the agent's
// running turn before its next model call, or wakes the agent with it
// when no turn runs: driver.Agent.Steer. The HTTP API sends it for a
// message posted with "steer": true.
const VerbSteer = "steer"

// steerVerb steers req.Message into the agent's running turn on behalf of
// req.By: 202 with the driver.Steered (the turn that takes it, or woke);
// 400 for a blank message; 409 when no turn runs and the gate is closed
// (paused, halted) or the agent is stopping — the message was not kept.
func (c *Control) steerVerb(r Reply, a *driver.Agent, req Request) Reply {
	text := strings.TrimSpace(req.Message)
	if text == "" {
		return r.fail(http.StatusBadRequest, "a steered message needs text")
	}
	st, err := a.Steer(req.Audit(), text)
	switch {
	case err == nil:
		return r.result(http.StatusAccepted, st)
	case errors.Is(err, driver.ErrPaused):
		return r.fail(http.StatusConflict, "agent %q is paused and runs no turn to steer: resume it with the message (`agent-worker resume %s --message ...`), which runs one", a.Name(), a.Name())
	case errors.Is(err, hook.ErrHalted):
		if hint := c.haltHint(a.Name(), a, VerbWake); hint != "" {
			return r.fail(http.StatusConflict, "%s", hint)
		}
		return r.fail(http.StatusConflict, "agent %q is halted and runs no turn to steer", a.Name())
	default:
		return r.fail(http.StatusConflict, "%v", err)
	}
}
