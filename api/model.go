package api

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/models"
)

// modelRoute is POST /v1/agents/{name}/model (role operate, as the
// control verb model needs).
func (s *Server) modelRoute() route {
	return verbRoute("POST /v1/agents/{name}/model", "model-switch", control.VerbModel, s.switchModel)
}

// switchModel serves POST /v1/agents/{name}/model
// {"model": "<key of models:>" | null, "reasoning_effort", "reason"}: the
// agent's owner switches it to that model (null: back to the config's)
// from its next model call, stores the switch (it survives restarts and
// changes of owner) and announces it (model-switched, naming the token
// and the reason). 200 with the owner's driver.ModelView; 400 for a
// missing "model" or an effort not low, medium or high; 422 with
// {"error", "models"} for a model the config does not define (models
// names those it does) or an effort its provider cannot take; 503 when no
// owner answered or the switch could not be stored (nothing changed).
func (s *Server) switchModel(w http.ResponseWriter, r *http.Request) {
	a, ok := s.agent(w, r)
	if !ok {
		return
	}
	var body struct {
		Model           json.RawMessage `json:"model"`
		ReasoningEffort string          `json:"reasoning_effort"`
		Reason          string          `json:"reason"`
	}
	if !s.decode(w, r, &body, true) {
		return
	}
	var key string
	switch raw := strings.TrimSpace(string(body.Model)); {
	case raw == "":
		fail(w, r, http.StatusBadRequest, `"model" is required: a key of the config's models:, or null for the agent's configured model`)
		return
	case raw == "null":
	default:
		if err := json.Unmarshal(body.Model, &key); err != nil || strings.TrimSpace(key) == "" {
			fail(w, r, http.StatusBadRequest, `"model" must be a key of the config's models: (a non-empty string), or null for the agent's configured model`)
			return
		}
	}
	effort := strings.TrimSpace(body.ReasoningEffort)
	if effort != "" && !slices.Contains(models.ReasoningEfforts, effort) {
		fail(w, r, http.StatusBadRequest, `"reasoning_effort" %q: want one of %s`, effort, strings.Join(models.ReasoningEfforts, ", "))
		return
	}
	if key == "" && effort != "" {
		fail(w, r, http.StatusBadRequest, `"reasoning_effort" needs a "model": with null the agent goes back to its configured model and effort`)
		return
	}
	reason, ok := operatorReason(w, r, body.Reason)
	if !ok {
		return
	}
	req := control.Request{Verb: control.VerbModel, Model: strings.TrimSpace(key), ReasoningEffort: effort, By: record(r).who.Name, Reason: reason}
	s.doVerb(w, r, a.Name(), req, func(reply control.Reply) string {
		result := "model " + req.Model
		if req.Model == "" {
			result = "model back to the configured one"
		}
		if effort != "" {
			result += ", reasoning effort " + effort
		}
		return result + " on " + reply.Owner
	})
}

// modelText says, as the status page shows it, which model a switched
// agent runs on: "model o4-mini (backup), reasoning effort high, since
// 10:00:00 UTC (3m ago) by ops: provider incident; configured gpt-4.1
// (main)". "" for an agent on its configured model.
func modelText(v AgentView, now time.Time) string {
	m := v.ModelSwitch
	if m == nil || !m.Switched {
		return ""
	}
	s := "model " + m.ActiveName + " (" + m.Active + ")"
	if m.ReasoningEffort != "" {
		s += ", reasoning effort " + m.ReasoningEffort
	}
	if m.Since != nil {
		s += ","
	}
	return s + sinceByWhy(m.Since, m.By, m.Reason, now) + "; configured " + m.ConfiguredName + " (" + m.Configured + ")"
}
