package config

import (
	"slices"
	"strings"
)

// reasoningLevels are the values of models.<name>.reasoning.
var reasoningLevels = []string{"low", "medium", "high"}

// modelSettings checks a model's reasoning level and its fallback: a known
// model, not itself, and no chain of fallbacks that comes back to where it
// started (reported once per loop, at the first of its models by name).
func (v *validator) modelSettings(c *Config, name string, m Model) {
	p := path{"models"}.key(name)
	if m.Reasoning != "" {
		if m.Provider == "scripted" {
			v.at(p.key("reasoning"), "only for providers openai, anthropic, gemini, not scripted (a script has no reasoning to tune)")
		} else {
			v.oneOf(p.key("reasoning"), m.Reasoning, reasoningLevels)
		}
	}
	switch fb, ok := c.Models[m.Fallback]; {
	case m.Fallback == "":
	case m.Fallback == name:
		v.at(p.key("fallback"), "a model cannot be its own fallback")
	case !ok:
		v.at(p.key("fallback"), "unknown model %q (models: %s)", m.Fallback, strings.Join(sortedKeys(c.Models), ", "))
	default:
		chain := []string{name, m.Fallback}
		for next := fb.Fallback; next != ""; next = c.Models[next].Fallback {
			if _, ok := c.Models[next]; !ok {
				break // reported at its own model
			}
			if i := slices.Index(chain, next); i >= 0 {
				loop := chain[i:]
				if i == 0 && slices.Min(loop) == name {
					v.at(p.key("fallback"), "fallbacks loop: %s → %s", strings.Join(loop, " → "), name)
				}
				break
			}
			chain = append(chain, next)
		}
	}
}
