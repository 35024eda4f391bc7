package metrics

import "github.com/prometheus/client_golang/prometheus"

// eventModelFallback is models.EventFallback: a call whose retries ran out
// went to the model's fallback. Data: model, fallback.
const eventModelFallback = "model-fallback"

// FallbackInfo is one of an agent's fallback models, known at start so
// that its series exist from the first scrape and its name is a bounded
// label value.
type FallbackInfo struct {
	// Model is the name pricing looks up, the name the fallback's
	// model-usage and model-retry events carry.
	Model string
	// Priced is the priced label of its model_cost_usd_total.
	Priced bool
}

// newFallbacks returns the fallbacks counter.
func newFallbacks() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "model_fallbacks_total",
		Help: "Model calls that went to a fallback model because the model's retries were exhausted (its provider was down), by the model that failed and its fallback. What the fallback answered is counted in the model_* series under the fallback's name."},
		[]string{"agent", "model", "fallback"})
}

// addFallbacks records info's fallbacks in a, in the order they are tried.
func (a *agent) addFallbacks(fbs []FallbackInfo) {
	for _, f := range fbs {
		if f.Model == "" {
			continue
		}
		a.chain = append(a.chain, f.Model)
		if _, ok := a.models[f.Model]; !ok {
			a.models[f.Model] = boolLabel(f.Priced)
		}
	}
}

// modelLabel returns the model and priced labels for a model name an
// event carries: its own when it is the agent's model or one of its
// fallbacks, else the agent's model's (names outside the config are not
// label values).
func (a *agent) modelLabel(name string) (model, priced string) {
	if p, ok := a.models[name]; ok {
		return name, p
	}
	return a.model, a.priced
}

// precreateFallbacks makes the series of the agent's fallbacks exist at 0.
func (m *Metrics) precreateFallbacks(name string, a *agent) {
	for i, fb := range a.chain[1:] {
		m.modelFallbacks.WithLabelValues(name, a.chain[i], fb)
		for _, o := range modelOutcomes {
			m.modelRequests.WithLabelValues(name, fb, o)
		}
		for _, t := range tokenTypes {
			m.modelTokens.WithLabelValues(name, fb, t.label)
		}
		m.modelCost.WithLabelValues(name, fb, a.models[fb])
	}
}

// recordFallback counts a model-fallback event between two of the agent's
// configured models; any other pair is counted as unconfigured.
func (m *Metrics) recordFallback(agentName string, a *agent, d map[string]any) {
	from, to := text(d["model"]), text(d["fallback"])
	_, okFrom := a.models[from]
	_, okTo := a.models[to]
	if !okFrom || !okTo {
		m.drops.unconfigured.Add(1)
		return
	}
	m.modelFallbacks.WithLabelValues(agentName, from, to).Inc()
}

func boolLabel(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
