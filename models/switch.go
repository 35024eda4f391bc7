package models

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"sync"

	"google.golang.org/adk/model"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/config"
)

// ReasoningEfforts are the reasoning efforts a switch takes (Switch.Use),
// the values of models.<name>.reasoning.
var ReasoningEfforts = []string{"low", "medium", "high"}

// Errors Switch.Use refuses a switch with, changing nothing.
var (
	// ErrUnknownModel: the model is not a key of the config's models:.
	// The error is an *UnknownModelError, which names the keys that are.
	ErrUnknownModel = errors.New("not a configured model")
	// ErrNoReasoning: a reasoning effort for a model whose provider has
	// none to tune (scripted), or an effort that is not one of
	// ReasoningEfforts.
	ErrNoReasoning = errors.New("reasoning effort not accepted")
)

// UnknownModelError is a switch to a model the config does not define;
// Configured are the keys it does, sorted.
type UnknownModelError struct {
	Model      string
	Configured []string
}

// Error reads `model "x": not a configured model (models: a, b)`.
func (e *UnknownModelError) Error() string {
	return fmt.Sprintf("model %q: %v (models: %s)", e.Model, ErrUnknownModel, strings.Join(e.Configured, ", "))
}

// Unwrap makes errors.Is(err, ErrUnknownModel) hold.
func (e *UnknownModelError) Unwrap() error { return ErrUnknownModel }

// ServedError is the error of a call that a model the agent was switched
// to failed: it names that model (its name, as hook.ServedByKey does for a
// response), so the failure is counted under it. It reads, and unwraps,
// as the model's own error.
type ServedError struct {
	Model string
	Err   error
}

func (e *ServedError) Error() string { return e.Err.Error() }

// Unwrap returns the model's error (outage.Is and the context's errors
// see through).
func (e *ServedError) Unwrap() error { return e.Err }

// ServedBy names the model that failed.
func (e *ServedError) ServedBy() string { return e.Model }

// Switch is a model.LLM that sends each call to the model in force: the
// agent's configured model, or the one an operator switched it to with
// Use — another key of the config's models:, or the configured one at
// another reasoning effort.
//
// Guarantees:
//   - A switch takes effect at the next call; a call under way finishes on
//     the model it started on.
//   - Only configured models are accepted, built by the same builder as
//     the configured model (a fresh instance, with its own fallbacks), and
//     a reasoning effort only for providers that have one: anything else
//     is refused (ErrUnknownModel, ErrNoReasoning) and changes nothing.
//   - Every response of a model the agent was switched to carries
//     CustomMetadata[hook.ServedByKey] = that model's name (or its fallback's,
//     when the fallback answered), so the cost guardrail prices it, and
//     the metrics label it, as the model that answered; its errors are a
//     *ServedError naming it. The request goes to it with its model name
//     cleared, so it uses its own.
//   - Going back (Use with key "", or the configured key without an
//     effort) is the configured instance again: a scripted model goes on
//     where its script was.
//
// Not guaranteed: that a switch is kept. Switch holds it in memory only;
// the driver stores it (driver.ModelSwitch) and restores it after a
// restart or a change of owner.
type Switch struct {
	key        string // the configured model's key
	configured model.LLM
	defs       map[string]config.Model
	build      Builder
	env        Env

	mu     sync.RWMutex
	active model.LLM // configured unless switched
	on     string    // the key in force ("": the configured one)
	effort string    // the effort it was switched with ("": the definition's)
}

var _ model.LLM = (*Switch)(nil)

// NewSwitch returns configured, the model of the config's key key, made
// switchable to any model of defs. build makes one model instance of a
// definition (WithFallbacks adds its fallbacks, reported to env).
func NewSwitch(key string, configured model.LLM, defs map[string]config.Model, build Builder, env Env) *Switch {
	return &Switch{key: key, configured: configured, defs: defs, build: build, env: env, active: configured}
}

// Configured returns the configured model's key and name (the name
// pricing looks up).
func (s *Switch) Configured() (key, name string) { return s.key, s.configured.Name() }

// Keys returns the keys Use accepts, sorted.
func (s *Switch) Keys() []string { return slices.Sorted(maps.Keys(s.defs)) }

// Use makes the model of key, at reasoning effort ("": the definition's
// own), the model of every next call, and returns its name. Key "", or
// the configured key without an effort, goes back to the configured
// model; configured then reports true. Using the model and effort in
// force changes nothing. A key not in the config is an
// *UnknownModelError; an effort for a provider without reasoning, or not
// one of ReasoningEfforts, is ErrNoReasoning; a model that cannot be
// built (its API key unset) is that error. Each changes nothing.
func (s *Switch) Use(key, effort string) (name string, configured bool, err error) {
	if key == "" || (key == s.key && effort == "") {
		s.set(s.configured, "", "")
		return s.configured.Name(), true, nil
	}
	def, ok := s.defs[key]
	if !ok {
		return "", false, &UnknownModelError{Model: key, Configured: s.Keys()}
	}
	if effort != "" {
		if def.Provider == "scripted" {
			return "", false, fmt.Errorf("model %q: %w: provider scripted has no reasoning to tune", key, ErrNoReasoning)
		}
		if !slices.Contains(ReasoningEfforts, effort) {
			return "", false, fmt.Errorf("model %q: %w: %q is not one of %s", key, ErrNoReasoning, effort, strings.Join(ReasoningEfforts, ", "))
		}
	}
	s.mu.RLock()
	same := s.on == key && s.effort == effort
	cur := s.active
	s.mu.RUnlock()
	if same {
		return cur.Name(), false, nil
	}
	defs := s.defs
	if effort != "" {
		defs = maps.Clone(s.defs)
		def.Reasoning = effort // the chosen model's; its fallbacks keep their own
		defs[key] = def
	}
	m, err := WithFallbacks(key, defs, s.build, s.env)
	if err != nil {
		return "", false, fmt.Errorf("build model %q: %w", key, err)
	}
	s.set(m, key, effort)
	return m.Name(), false, nil
}

func (s *Switch) set(m model.LLM, key, effort string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active, s.on, s.effort = m, key, effort
}

// Name returns the configured model's name: the agent's model is the
// configured one; responses of another name themselves (hook.ServedByKey).
func (s *Switch) Name() string { return s.configured.Name() }

// GetGoogleLLMVariant reports the backend of the model in force, so that
// ADK adapts requests as it would for that model alone.
func (s *Switch) GetGoogleLLMVariant() genai.Backend {
	s.mu.RLock()
	m := s.active
	s.mu.RUnlock()
	if v, ok := m.(interface{ GetGoogleLLMVariant() genai.Backend }); ok {
		return v.GetGoogleLLMVariant()
	}
	return genai.BackendUnspecified
}

// GenerateContent implements model.LLM: the call goes to the model in
// force when it starts (see Switch).
func (s *Switch) GenerateContent(ctx context.Context, req *model.LLMRequest, stream bool) iter.Seq2[*model.LLMResponse, error] {
	s.mu.RLock()
	m := s.active
	s.mu.RUnlock()
	if m == s.configured {
		return m.GenerateContent(ctx, req, stream)
	}
	return func(yield func(*model.LLMResponse, error) bool) {
		r := model.LLMRequest{}
		if req != nil {
			r = *req
		}
		r.Model = "" // the configured model's name, set by ADK
		name := m.Name()
		for resp, err := range m.GenerateContent(ctx, &r, stream) {
			if err != nil {
				yield(nil, &ServedError{Model: name, Err: err})
				return
			}
			if !yield(stamp(resp, name), nil) {
				return
			}
		}
	}
}

// PricedNames returns the name each model of defs answers under (what
// pricing looks up and the metrics label): its model, or for a scripted
// model without one its key, as New names it.
func PricedNames(defs map[string]config.Model) map[string]string {
	out := make(map[string]string, len(defs))
	for k, d := range defs {
		out[k] = d.Model
		if d.Model == "" {
			out[k] = k
		}
	}
	return out
}
