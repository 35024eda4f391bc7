// Package models turns a model definition from config into an ADK
// model.LLM. Providers live in sub-packages (scripted today; openai, gemini
// and anthropic follow); none may hide the usage numbers a response
// carries, because cost guardrails depend on them.
package models

import (
	"fmt"

	"google.golang.org/adk/model"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/models/scripted"
)

// New returns a fresh model instance for the definition m named key.
// Callers create one instance per agent: scripted models keep one cursor
// per instance.
func New(key string, m config.Model) (model.LLM, error) {
	switch m.Provider {
	case "scripted":
		return scripted.New(key, m)
	case "openai", "gemini", "anthropic":
		return nil, fmt.Errorf("model %q: provider %q is not available in this build yet; use provider: scripted", key, m.Provider)
	default:
		return nil, fmt.Errorf("model %q: unknown provider %q", key, m.Provider)
	}
}
