package config

import "strings"

// Memory configures an agent's running memory: the turns that leave its
// history window (turn.history_turns) are folded by a model into a
// bounded summary, kept in the store and placed in every prompt as the
// agent's own notes. The top-level memory: section is the default of
// every agent; agents[].memory overrides it key by key.
type Memory struct {
	// Enabled folds turns into the memory. Default true; false keeps the
	// window alone, and turns that leave it are deleted unsummarised.
	Enabled *bool `yaml:"enabled"`
	// Model is the key (in models) of the model that writes the memory,
	// usually a cheaper one than the agent's. Default: the agent's own.
	// Its calls are charged to the agent's guardrails like any other.
	Model string `yaml:"model"`
	// MaxTokens bounds the memory (estimated at four characters a token);
	// a longer summary is clipped. Default 1000.
	MaxTokens int `yaml:"max_tokens"`
}

// On reports whether the memory is enabled (the default).
func (m Memory) On() bool { return m.Enabled == nil || *m.Enabled }

// Bounds of memory:.
const (
	// DefaultMemoryMaxTokens is memory.max_tokens when unset.
	DefaultMemoryMaxTokens = 1000
	// MaxMemoryTokens bounds memory.max_tokens: the memory is in every
	// prompt.
	MaxMemoryTokens = 32768
	// MemoryFoldRoom is how many turns beyond the window the store must
	// be able to hold while their fold waits (after a failed summary):
	// with memory on, turn.history_turns is at most MaxHistoryTurns -
	// MemoryFoldRoom.
	MemoryFoldRoom = 8
)

// applyMemoryDefaults fills the top-level memory: section and lets every
// agent inherit what its own memory: leaves unset.
func applyMemoryDefaults(c *Config) {
	setBool(&c.Memory.Enabled, true)
	setInt(&c.Memory.MaxTokens, DefaultMemoryMaxTokens)
	for i := range c.Agents {
		m := &c.Agents[i].Memory
		if m.Enabled == nil {
			on := *c.Memory.Enabled
			m.Enabled = &on
		}
		setString(&m.Model, c.Memory.Model)
		setInt(&m.MaxTokens, c.Memory.MaxTokens)
	}
}

// memory checks the top-level memory: section and every agent's.
func (v *validator) memory(c *Config) {
	v.memorySection(c, path{"memory"}, c.Memory)
	for i := range c.Agents {
		a := &c.Agents[i]
		p := path{"agents"}.index(i)
		// What an agent inherits is reported once, at the top level.
		own := a.Memory
		if own.Model == c.Memory.Model {
			own.Model = ""
		}
		if own.MaxTokens == c.Memory.MaxTokens {
			own.MaxTokens = 0
		}
		v.memorySection(c, p.key("memory"), own)
		if limit := MaxHistoryTurns - MemoryFoldRoom; a.Memory.On() && a.Turn.HistoryTurns > limit && a.Turn.HistoryTurns <= MaxHistoryTurns {
			v.at(p.key("turn", "history_turns"), "with memory on, must be at most %d: turns that leave the window wait in the store (which keeps %d per agent) until they are folded into the memory; lower it, or set memory.enabled: false; got %d",
				limit, MaxHistoryTurns, a.Turn.HistoryTurns)
		}
	}
}

func (v *validator) memorySection(c *Config, p path, m Memory) {
	if m.Model != "" {
		if _, ok := c.Models[m.Model]; !ok {
			v.at(p.key("model"), "unknown model %q (models: %s)", m.Model, strings.Join(sortedKeys(c.Models), ", "))
		}
	}
	switch {
	case m.MaxTokens < 0:
		v.at(p.key("max_tokens"), "must not be negative; got %d", m.MaxTokens)
	case m.MaxTokens > MaxMemoryTokens:
		v.at(p.key("max_tokens"), "must be at most %d (the memory is sent with every prompt); got %d", MaxMemoryTokens, m.MaxTokens)
	}
}
