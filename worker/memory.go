package worker

import (
	"log/slog"

	"google.golang.org/adk/model"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/hook"
)

// memorySpec resolves an agent's memory: section for the driver: the
// model that folds (memory.model built by build, else the agent's own
// model own) and the price of its responses — by the model that served
// each (a fallback's own), from the built-in table and pricing:. An
// unpriced fold model is said at start, as the guard says of an unpriced
// agent model: its folds cost $0 and no ceiling binds them.
func memorySpec(cfg *config.Config, a config.Agent, own model.LLM, build func(key string) (model.LLM, error), log *slog.Logger) (driver.MemorySpec, error) {
	if !a.Memory.On() {
		return driver.MemorySpec{}, nil
	}
	spec := driver.MemorySpec{Enabled: true, MaxTokens: a.Memory.MaxTokens}
	fold := own
	if a.Memory.Model != "" && a.Memory.Model != a.Model {
		m, err := build(a.Memory.Model)
		if err != nil {
			return driver.MemorySpec{}, err
		}
		spec.Model, fold = m, m
	}
	prices := guard.NewPrices(cfg.Pricing)
	if _, ok := prices.Lookup(fold.Name()); !ok && spec.Model != nil {
		log.Warn("memory model has no price: its folds cost $0 here and no cost ceiling binds them", "agent", a.Name, "model", fold.Name())
	}
	name := fold.Name()
	spec.Cost = func(resp *model.LLMResponse) float64 {
		served := name
		if s, ok := resp.CustomMetadata[hook.ServedByKey].(string); ok && s != "" {
			served = s
		}
		price, ok := prices.Lookup(served)
		if !ok {
			return 0
		}
		return price.Cost(guard.UsageOf(resp.UsageMetadata, resp.CustomMetadata))
	}
	return spec, nil
}
