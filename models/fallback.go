package models

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"maps"

	"google.golang.org/adk/model"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/outage"
)

// EventFallback is published when a call's retries against a model ran
// out (its provider is down) and the call goes to the model's fallback.
// Data: model (the failing model's name, what pricing looks up), fallback
// (the fallback's name), error (the failing model's last error).
const EventFallback = "model-fallback"

// Builder returns a fresh instance of the model definition def, named key
// in the config.
type Builder func(key string, def config.Model) (model.LLM, error)

// NewWithFallbacks is WithFallbacks with New as the builder: the model
// named key, and its chain of fallbacks, each a fresh instance for
// env.Agent.
func NewWithFallbacks(ctx context.Context, key string, defs map[string]config.Model, env Env) (model.LLM, error) {
	return WithFallbacks(key, defs, func(key string, def config.Model) (model.LLM, error) {
		return New(ctx, key, def, env)
	}, env)
}

// WithFallbacks returns the model named key built by build, wrapped (see
// Fallback) with the chain of fallbacks its definition names:
// models.<key>.fallback, that model's own fallback, and so on. A model
// without a fallback is returned as build made it. A chain naming an
// unknown model or coming back to a model already in it is an error
// (config validation refuses both before).
func WithFallbacks(key string, defs map[string]config.Model, build Builder, env Env) (model.LLM, error) {
	return withFallbacks(key, defs, build, env, nil)
}

func withFallbacks(key string, defs map[string]config.Model, build Builder, env Env, seen []string) (model.LLM, error) {
	def, ok := defs[key]
	if !ok {
		return nil, fmt.Errorf("model %q: not defined", key)
	}
	m, err := build(key, def)
	if err != nil || def.Fallback == "" {
		return m, err
	}
	seen = append(seen, key)
	for _, k := range seen {
		if k == def.Fallback {
			return nil, fmt.Errorf("model %q: fallbacks loop back to %q", key, def.Fallback)
		}
	}
	fb, err := withFallbacks(def.Fallback, defs, build, env, seen)
	if err != nil {
		return nil, fmt.Errorf("model %q: fallback: %w", key, err)
	}
	return NewFallback(m, fb, env), nil
}

// Fallback is a model.LLM that sends every call to its primary model and,
// when the primary's retries are exhausted, the same call to its fallback.
//
// Guarantees:
//   - The fallback is tried only for an outage (package outage: the
//     provider answered 429 or 5xx, or could not be reached, on every
//     attempt), only while the caller's context is live, and only when
//     the primary yielded nothing yet. Any other error of the primary (a
//     400, a cancelled turn) is returned as it is.
//   - Every fallback is logged (warn), published as EventFallback, and its
//     responses carry CustomMetadata[hook.ServedByKey] = the fallback's name,
//     so they are priced and counted as the fallback's. The request goes
//     to the fallback with its model name cleared, so the fallback uses
//     its own.
//   - A fallback that fails too fails the call with an error that is
//     still the primary's outage (the turn waits for the provider as
//     without a fallback; the messages are not held responsible) and
//     names the fallback's error; a cancelled context returns the
//     fallback's error as it is.
//
// Not guaranteed: that the fallback is used for the next call. Each call
// starts at the primary again, so a long outage costs every call the
// primary's retries first.
type Fallback struct {
	primary, fallback model.LLM
	agent             string
	events            *events.Bus
	log               *slog.Logger
	clock             clock.Clock
}

var _ model.LLM = (*Fallback)(nil)

// NewFallback returns primary with fallback behind it. env says where
// fallbacks are reported (Agent, Events, Log, Clock; nil ones are
// skipped or defaulted).
func NewFallback(primary, fallback model.LLM, env Env) *Fallback {
	f := &Fallback{primary: primary, fallback: fallback, agent: env.Agent, events: env.Events, log: env.Log, clock: env.Clock}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	if f.clock == nil {
		f.clock = clock.Real()
	}
	return f
}

// Name returns the primary's name: the agent's model is the primary.
func (f *Fallback) Name() string { return f.primary.Name() }

// GetGoogleLLMVariant reports the primary's backend, so that ADK adapts
// requests as it would for the primary alone.
func (f *Fallback) GetGoogleLLMVariant() genai.Backend {
	if v, ok := f.primary.(interface{ GetGoogleLLMVariant() genai.Backend }); ok {
		return v.GetGoogleLLMVariant()
	}
	return genai.BackendUnspecified
}

// FallbackNames returns the names of m's fallbacks in the order they are
// tried; none for a model that is not a Fallback. For a Switch they are
// the configured model's.
func FallbackNames(m model.LLM) []string {
	if s, ok := m.(*Switch); ok {
		m = s.configured
	}
	var names []string
	for {
		f, ok := m.(*Fallback)
		if !ok {
			return names
		}
		m = f.fallback
		names = append(names, m.Name()) // a Fallback's name is its primary's
	}
}

// GenerateContent implements model.LLM; see Fallback for when the
// fallback answers.
func (f *Fallback) GenerateContent(ctx context.Context, req *model.LLMRequest, stream bool) iter.Seq2[*model.LLMResponse, error] {
	return func(yield func(*model.LLMResponse, error) bool) {
		var down error
		yielded := false
		for resp, err := range f.primary.GenerateContent(ctx, req, stream) {
			if err != nil {
				if !yielded && ctx.Err() == nil && outage.Is(err) {
					down = err
					break
				}
				yield(nil, err)
				return
			}
			yielded = true
			if !yield(resp, nil) {
				return
			}
		}
		if down == nil {
			return
		}
		name := f.fallback.Name()
		f.log.LogAttrs(ctx, slog.LevelWarn, "model unavailable, retries exhausted: the call goes to its fallback",
			slog.String("agent", f.agent), slog.String("model", f.primary.Name()), slog.String("fallback", name), slog.String("error", down.Error()))
		if f.events != nil {
			f.events.Publish(events.Event{Time: f.clock.Now(), Agent: f.agent, Type: EventFallback,
				Data: map[string]any{"model": f.primary.Name(), "fallback": name, "error": down.Error()}})
		}
		r := model.LLMRequest{}
		if req != nil {
			r = *req
		}
		r.Model = "" // the primary's name, set by ADK; the fallback has its own
		for resp, err := range f.fallback.GenerateContent(ctx, &r, stream) {
			if err != nil {
				if ctx.Err() == nil {
					f.log.LogAttrs(ctx, slog.LevelWarn, "the fallback model failed too",
						slog.String("agent", f.agent), slog.String("model", f.primary.Name()), slog.String("fallback", name), slog.String("error", err.Error()))
					err = fmt.Errorf("%w (fallback %s failed too: %w)", down, name, err)
				}
				yield(nil, err)
				return
			}
			if !yield(stamp(resp, name), nil) {
				return
			}
		}
	}
}

// stamp returns resp naming name as the model that answered, unless a
// fallback further down the chain named itself already.
func stamp(resp *model.LLMResponse, name string) *model.LLMResponse {
	if resp == nil {
		return nil
	}
	if _, ok := resp.CustomMetadata[hook.ServedByKey]; ok {
		return resp
	}
	out := *resp
	out.CustomMetadata = maps.Clone(resp.CustomMetadata)
	if out.CustomMetadata == nil {
		out.CustomMetadata = map[string]any{}
	}
	out.CustomMetadata[hook.ServedByKey] = name
	return &out
}
