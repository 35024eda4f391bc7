// Package models turns a model definition from config into an ADK
// model.LLM. Providers live in sub-packages (scripted, openai, anthropic,
// gemini); none may hide the usage numbers a response carries, because
// cost guardrails depend on them. A model with a fallback is wrapped in a
// Fallback, which hands a call to the fallback when the provider is down
// and says which model answered (hook.ServedByKey).
package models

import (
	"context"
	"fmt"
	"log/slog"

	"google.golang.org/adk/model"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/models/anthropic"
	"github.com/agent-worker/agent-worker/models/gemini"
	"github.com/agent-worker/agent-worker/models/openai"
	"github.com/agent-worker/agent-worker/models/retry"
	"github.com/agent-worker/agent-worker/models/scripted"
)

// EventRetry is published for every model request attempt that failed
// and will be retried: Data outcome is "retry" (5xx, network, timeout) or
// "rate_limited" (429).
const EventRetry = "model-retry"

// Env is where a model instance reports to.
type Env struct {
	// Agent is the agent the instance serves (events carry it).
	Agent  string
	Events *events.Bus
	Log    *slog.Logger
	Clock  clock.Clock
}

// New returns a fresh model instance for the definition m named key.
// Callers create one instance per agent: scripted models keep one cursor
// per instance, and retries are reported per agent. m.Reasoning goes to
// the provider; m.Fallback is not followed here (NewWithFallbacks does).
func New(ctx context.Context, key string, m config.Model, env Env) (model.LLM, error) {
	if env.Log == nil {
		env.Log = slog.New(slog.DiscardHandler)
	}
	if env.Clock == nil {
		env.Clock = clock.Real()
	}
	if m.Provider == "scripted" {
		if m.Reasoning != "" {
			return nil, fmt.Errorf("model %q: reasoning is not for provider scripted", key)
		}
		return scripted.New(key, m)
	}
	apiKey, err := APIKey(m)
	if err != nil {
		return nil, fmt.Errorf("model %q: %w", key, err)
	}
	log := env.Log.With("model", key, "provider", m.Provider)
	policy := retry.Policy{Base: m.Retry.Base.D(), Max: m.Retry.MaxWait.D(), Log: log,
		OnAttempt: func(outcome string) {
			if env.Events != nil && (outcome == "retry" || outcome == "rate_limited") {
				env.Events.Publish(events.Event{Time: env.Clock.Now(), Agent: env.Agent, Type: EventRetry, Data: map[string]any{"outcome": outcome, "model": m.Model}})
			}
		}}
	if m.Retry.Max != nil {
		policy.MaxRetries = *m.Retry.Max
	}
	switch m.Provider {
	case "openai":
		return openai.New(openai.Options{Model: m.Model, BaseURL: m.BaseURL, APIKey: apiKey, Headers: m.Headers,
			Timeout: m.Timeout.D(), Retry: policy, Log: log, Reasoning: m.Reasoning})
	case "anthropic":
		return anthropic.New(anthropic.Options{Model: m.Model, BaseURL: m.BaseURL, APIKey: apiKey, Headers: m.Headers,
			Timeout: m.Timeout.D(), Retry: policy, Log: log, MaxTokens: m.MaxTokens, Reasoning: m.Reasoning})
	case "gemini":
		o := gemini.Options{Model: m.Model, APIKey: apiKey, BaseURL: m.BaseURL, Vertex: m.Vertex, Project: m.Project, Location: m.Location,
			Timeout: m.Timeout.D(), Retry: policy, Headers: m.Headers, Log: log, Reasoning: m.Reasoning}
		if m.Vertex && apiKey != "" {
			o.Project, o.Location = "", "" // express mode: the key identifies the project
		}
		return gemini.New(ctx, o)
	}
	return nil, fmt.Errorf("model %q: unknown provider %q", key, m.Provider)
}

// APIKey reads the model's key from the environment variable or file the
// config names ("" when it names neither).
func APIKey(m config.Model) (string, error) {
	return config.ReadSecret("api_key", m.APIKeyEnv, m.APIKeyFile)
}
