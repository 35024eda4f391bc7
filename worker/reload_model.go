package worker

import (
	"maps"
	"slices"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/metrics"
	"github.com/agent-worker/agent-worker/models"
)

// A config reload and an operator's model switch (POST
// /v1/agents/{name}/model, driver.Agent.SwitchModel):
//
//   - An agent switched to a model the reload leaves as it was keeps the
//     switch, whatever else of the agent changes (a changed agent's new
//     spec restores the stored switch before its next turn).
//   - An agent switched to a model the reload changes or removes is
//     changed like an agent whose own model changed (Change.Why names
//     "models.<key> (switched)"): the new agent restores the stored switch
//     with the model's new definition, or, when the model is gone, drops
//     it — logged, announced as model-switch-dropped and deleted — and
//     runs on its configured model.
//
// Only the replica that runs the agent knows its switch; elsewhere the
// agent restores the stored one, against its own config, when it takes
// the agent.

// switchedModels adds to ch the agents running here on a switched model
// whose definition the reload changes or removes.
func (w *Worker) switchedModels(cur, next *config.Config, ch *Change) {
	changed := changedModels(cur, next)
	add := map[string]bool{}
	for _, a := range next.Agents {
		ag, err := w.driver.Agent(a.Name)
		if err != nil || slices.Contains(ch.Added, a.Name) {
			continue
		}
		c, ok := ag.ModelChoice()
		if !ok || !changed[c.Model] {
			continue
		}
		ch.Why[a.Name] = append(ch.Why[a.Name], "models."+c.Model+" (switched)")
		add[a.Name] = true
	}
	if len(add) == 0 {
		return
	}
	var out []string // in the new file's order, as Change says
	for _, a := range next.Agents {
		if add[a.Name] || slices.Contains(ch.Changed, a.Name) {
			out = append(out, a.Name)
		}
	}
	ch.Changed = out
}

// alternates are the models an operator may switch any agent to — every
// model of cfg — as the metrics label them (metrics.AgentInfo.Alternates).
func (w *Worker) alternates(cfg *config.Config) []metrics.FallbackInfo {
	names := models.PricedNames(cfg.Models)
	out := make([]metrics.FallbackInfo, 0, len(names))
	for _, key := range slices.Sorted(maps.Keys(names)) {
		out = append(out, metrics.FallbackInfo{Model: names[key], Priced: w.guard.PricedModel(names[key])})
	}
	return out
}
