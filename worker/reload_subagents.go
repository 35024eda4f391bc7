package worker

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/adk/model"
	"google.golang.org/adk/tool"

	"github.com/agent-worker/agent-worker/background"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/models"
	"github.com/agent-worker/agent-worker/natsbus"
	"github.com/agent-worker/agent-worker/tools"
)

// subagentSpecs are how the subagents of cfg's agents granted
// spawn_subagent run, by agent: a fresh model instance per subagent (the
// agent's model unless subagents.model names another, built once here
// to fail early), priced like any model, and only the tools
// subagents.tools grants.
func (w *Worker) subagentSpecs(ctx context.Context, cfg *config.Config, o Options) (map[string]background.Spec, error) {
	prices := guard.NewPrices(cfg.Pricing)
	out := map[string]background.Spec{}
	for _, a := range cfg.Agents {
		if !slices.Contains(a.Tools, tools.SpawnSubagent) {
			continue
		}
		key := a.Subagents.Model
		if key == "" {
			key = a.Model
		}
		def := cfg.Models[key]
		name := a.Name
		newModel := func() (model.LLM, error) {
			if o.Models != nil {
				return o.Models(name, def)
			}
			return models.New(ctx, key, def, models.Env{Agent: name, Events: w.bus, Log: o.Log, Clock: o.Clock})
		}
		probe, err := newModel()
		if err != nil {
			return nil, fmt.Errorf("agent %q subagents: %w", name, err)
		}
		price, priced := prices.Lookup(probe.Name())
		subTools := a.Subagents.Tools
		publishAllow, httpAllow, httpPrivate := a.Publish, a.HTTPGet, a.HTTPGetAllowPrivate
		out[name] = background.Spec{
			Max: a.Subagents.Max, BudgetUSD: a.Subagents.BudgetUSD, Timeout: a.Subagents.Timeout.D(),
			Instruction: a.Subagents.Instruction, Model: newModel, Price: price, Priced: priced,
			Tools: func() ([]tool.Tool, error) {
				return tools.Build(subTools, tools.Env{Agent: name, Host: subagentHost{w.bus, name, o.Clock},
					Publisher: natsbus.Publisher{NC: w.conn.NC}, PublishAllow: publishAllow, SubjectPrefix: cfg.NATS.SubjectPrefix,
					HTTPAllow: httpAllow, HTTPAllowPrivate: httpPrivate})
			},
		}
	}
	return out, nil
}

// setSubagents gives the agents a reload adds or changes (a pricing
// change changes every agent) their subagents' Spec before the agents
// change, so their first turn can spawn; running subagents go on.
func (w *Worker) setSubagents(specs map[string]background.Spec) {
	for name, spec := range specs {
		w.subagents.Set(name, currentAgent{w.driver, name}, spec)
	}
}

// dropSubagents forgets the parents of cur the applied config no longer
// grants spawn_subagent (removed, or the grant withdrawn): their running
// subagents here are stopped.
func (w *Worker) dropSubagents(cur, applied *config.Config) {
	for _, a := range cur.Agents {
		if !slices.Contains(a.Tools, tools.SpawnSubagent) {
			continue
		}
		if b, ok := applied.Agent(a.Name); ok && slices.Contains(b.Tools, tools.SpawnSubagent) {
			continue
		}
		w.subagents.Remove(a.Name)
		w.log.Info("agent no longer spawns subagents: its running subagents here are stopped", "agent", a.Name)
	}
}
