package control

import (
	"errors"
	"net/http"

	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/models"
)

// VerbModel switches the agent's model on its owner (Request.Model, ""
// for the config's; Request.ReasoningEffort), from its next model call:
// driver.Agent.SwitchModel.
const VerbModel = "model"

// ModelRefusal is the result of a model switch the owner refused (422):
// why, and the models it would take.
type ModelRefusal struct {
	Error string `json:"error"`
	// Models are the configured models' keys (for an unknown model).
	Models []string `json:"models,omitempty"`
}

// modelVerb switches the agent's model on its owner, on behalf of
// req.By: 200 with the driver.ModelView now in force; 422 with a
// ModelRefusal for a model the config does not define (naming those it
// does) or an effort the model cannot take; 503 when this replica may not
// write the agent's state or the store failed (nothing changed: retry);
// 404 for an agent whose model cannot be switched.
func modelVerb(r Reply, a *driver.Agent, req Request) Reply {
	v, err := a.SwitchModel(req.Audit(), req.Model, req.ReasoningEffort)
	var unknown *models.UnknownModelError
	switch {
	case err == nil:
		return r.result(http.StatusOK, v)
	case errors.As(err, &unknown):
		r = r.result(http.StatusUnprocessableEntity, ModelRefusal{Error: err.Error(), Models: unknown.Configured})
	case errors.Is(err, models.ErrNoReasoning):
		r = r.result(http.StatusUnprocessableEntity, ModelRefusal{Error: err.Error()})
	case errors.Is(err, driver.ErrNoModelSwitch):
		return r.fail(http.StatusNotFound, "%v", err)
	default: // not the owner, the store
		return r.fail(http.StatusServiceUnavailable, "%v; nothing changed, retry", err)
	}
	r.Error = err.Error()
	return r
}
