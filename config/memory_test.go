package config

import "testing"

// Every agent inherits the top-level memory: key by key, and its own
// memory: wins where it says something.
func TestMemoryDefaultsAndInheritance(t *testing.T) {
	t.Parallel()
	c, errs := loadText(t, `
models:
  main: {provider: scripted, behaviour: demo}
  cheap: {provider: scripted, behaviour: demo}
memory: {model: cheap}
agents:
  - {name: a, model: main}
  - {name: b, model: main, memory: {max_tokens: 300, model: main}}
  - {name: c, model: main, memory: {enabled: false}}
`)
	assertErrors(t, errs, nil)
	if !c.Memory.On() || c.Memory.MaxTokens != DefaultMemoryMaxTokens || c.Memory.Model != "cheap" {
		t.Fatalf("top-level memory = %+v", c.Memory)
	}
	for _, w := range []struct {
		agent  int
		on     bool
		model  string
		tokens int
	}{{0, true, "cheap", 1000}, {1, true, "main", 300}, {2, false, "cheap", 1000}} {
		m := c.Agents[w.agent].Memory
		if m.On() != w.on || m.Model != w.model || m.MaxTokens != w.tokens {
			t.Errorf("agents[%d].memory = on %v, model %q, max_tokens %d; want %v, %q, %d", w.agent, m.On(), m.Model, m.MaxTokens, w.on, w.model, w.tokens)
		}
	}
	if d := Default(); !d.Agents[0].Memory.On() || d.Agents[0].Memory.MaxTokens != DefaultMemoryMaxTokens {
		t.Fatalf("embedded default memory = %+v", d.Agents[0].Memory)
	}
}

func TestMemoryValidation(t *testing.T) {
	t.Parallel()
	_, errs := loadText(t, `
models:
  main: {provider: scripted, behaviour: demo}
memory: {model: nope, max_tokens: -1}
agents:
  - name: a
    model: main
    memory: {max_tokens: 40000}
    turn: {history_turns: 60}
  - name: b
    model: main
    memory: {enabled: false}
    turn: {history_turns: 60}
`)
	assertErrors(t, errs, []string{
		`config.yaml:3: memory.model: unknown model "nope" (models: main)`,
		"config.yaml:3: memory.max_tokens: must not be negative; got -1",
		"config.yaml:7: agents[0].memory.max_tokens: must be at most 32768 (the memory is sent with every prompt); got 40000",
		"config.yaml:8: agents[0].turn.history_turns: with memory on, must be at most 56: turns that leave the window wait in the store (which keeps 64 per agent) until they are folded into the memory; lower it, or set memory.enabled: false; got 60",
	})
}
