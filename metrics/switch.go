package metrics

// addAlternates records the models an operator may switch the agent to
// (models.Switch) as model labels of its own: a response of a switched
// agent names the model that answered (model-usage's model), and is
// counted under that name, as a fallback's is. Their series are not made
// ahead: they appear with the first response, so an agent that is never
// switched exports no series for them. Names outside the config stay
// outside the label values (modelLabel).
func (a *agent) addAlternates(alts []FallbackInfo) {
	for _, m := range alts {
		if m.Model == "" {
			continue
		}
		if _, ok := a.models[m.Model]; !ok {
			a.models[m.Model] = boolLabel(m.Priced)
		}
	}
}
