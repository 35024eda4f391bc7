package models

import (
	"errors"
	"reflect"
	"testing"

	"google.golang.org/adk/model"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/models/internal/providertest"
	"github.com/agent-worker/agent-worker/outage"
)

const mainReply = `{
  "id": "chatcmpl-main1", "object": "chat.completion", "created": 1741570284, "model": "gpt-4.1-2025-04-14",
  "choices": [{"index": 0, "message": {"role": "assistant", "content": "looking at db-1", "refusal": null, "annotations": []},
    "logprobs": null, "finish_reason": "stop"}],
  "usage": {"prompt_tokens": 500, "completion_tokens": 50, "total_tokens": 550,
    "prompt_tokens_details": {"cached_tokens": 0}, "completion_tokens_details": {"reasoning_tokens": 0}}
}`

// newSwitch is the switchable model of "main", built as the worker builds
// it (New, each model with its fallbacks).
func newSwitch(t *testing.T, defs map[string]config.Model) *Switch {
	t.Helper()
	env := Env{Agent: "triage"}
	build := func(key string, def config.Model) (model.LLM, error) { return New(t.Context(), key, def, env) }
	m, err := WithFallbacks("main", defs, build, env)
	if err != nil {
		t.Fatal(err)
	}
	return NewSwitch("main", m, defs, build, env)
}

// A switch sends the next call to the other configured model, over its own
// wire with its own model name and the effort asked for, and its response
// names the model that answered; going back sends calls to the configured
// model again, unstamped.
func TestSwitchSendsTheNextCallToTheModelInForce(t *testing.T) {
	t.Parallel()
	main := providertest.NewServer(t, providertest.Reply(200, mainReply))
	cheap := providertest.NewServer(t, providertest.Reply(200, cheapReply))
	s := newSwitch(t, map[string]config.Model{"main": openaiDef(main, "gpt-4.1", ""), "cheap": openaiDef(cheap, "gpt-4.1-nano", "")})

	name, configured, err := s.Use("cheap", "high")
	if err != nil || name != "gpt-4.1-nano" || configured {
		t.Fatalf("Use(cheap, high) = %q, %v, %v", name, configured, err)
	}
	resp, err := providertest.Generate(t.Context(), s, agentRequest(s.Name()))
	if err != nil {
		t.Fatal(err)
	}
	if resp.CustomMetadata[hook.ServedByKey] != "gpt-4.1-nano" {
		t.Errorf("served by %v, want gpt-4.1-nano (priced as the model that answered)", resp.CustomMetadata[hook.ServedByKey])
	}
	got := cheap.Requests()
	if len(got) != 1 || got[0].Body["model"] != "gpt-4.1-nano" || got[0].Body["reasoning_effort"] != "high" {
		t.Fatalf("cheap got %v, want one request for gpt-4.1-nano with reasoning_effort high", got)
	}
	if s.Name() != "gpt-4.1" || len(main.Requests()) != 0 {
		t.Errorf("Name %q (want the configured gpt-4.1), main asked %d times (want 0)", s.Name(), len(main.Requests()))
	}

	if name, configured, err := s.Use("", ""); err != nil || name != "gpt-4.1" || !configured {
		t.Fatalf("Use(\"\") = %q, %v, %v", name, configured, err)
	}
	resp, err = providertest.Generate(t.Context(), s, agentRequest(s.Name()))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := resp.CustomMetadata[hook.ServedByKey]; ok || len(main.Requests()) != 1 || len(cheap.Requests()) != 1 {
		t.Errorf("after going back: metadata %v, main %d, cheap %d requests; want the configured model's unstamped answer",
			resp.CustomMetadata, len(main.Requests()), len(cheap.Requests()))
	}
}

// Refusals change nothing: an unknown model names the configured ones, and
// a reasoning effort is refused for a scripted model and outside
// low/medium/high.
func TestSwitchRefusals(t *testing.T) {
	t.Parallel()
	main := providertest.NewServer(t, providertest.Reply(200, mainReply))
	s := newSwitch(t, map[string]config.Model{
		"main": openaiDef(main, "gpt-4.1", ""),
		"fake": {Provider: "scripted", Model: "fake-1", Script: []config.ScriptStep{{Text: "ok"}}},
	})
	_, _, err := s.Use("gpt-5", "")
	var unknown *UnknownModelError
	if !errors.As(err, &unknown) || !errors.Is(err, ErrUnknownModel) || unknown.Model != "gpt-5" || !reflect.DeepEqual(unknown.Configured, []string{"fake", "main"}) {
		t.Errorf("Use(gpt-5) = %v, want an UnknownModelError naming fake and main", err)
	}
	if _, _, err := s.Use("fake", "high"); !errors.Is(err, ErrNoReasoning) {
		t.Errorf("Use(fake, high) = %v, want ErrNoReasoning", err)
	}
	if _, _, err := s.Use("main", "extreme"); !errors.Is(err, ErrNoReasoning) {
		t.Errorf("Use(main, extreme) = %v, want ErrNoReasoning", err)
	}
	if _, err := providertest.Generate(t.Context(), s, agentRequest(s.Name())); err != nil || len(main.Requests()) != 1 {
		t.Errorf("after refusals the call = %v and main got %d requests; want the configured model", err, len(main.Requests()))
	}
}

// A switched model keeps its own fallbacks, which name themselves when they
// answer; FallbackNames of a Switch are the configured model's.
func TestSwitchToAModelWithAFallback(t *testing.T) {
	t.Parallel()
	main := providertest.NewServer(t, providertest.Reply(200, mainReply))
	down := providertest.NewServer(t, providertest.Reply(503, overloaded))
	cheap := providertest.NewServer(t, providertest.Reply(200, cheapReply))
	s := newSwitch(t, map[string]config.Model{
		"main":   openaiDef(main, "gpt-4.1", ""),
		"backup": openaiDef(down, "o4-mini", "cheap"),
		"cheap":  openaiDef(cheap, "gpt-4.1-nano", ""),
	})
	if got := FallbackNames(s); len(got) != 0 {
		t.Errorf("FallbackNames = %q, want main's (none)", got)
	}
	if _, _, err := s.Use("backup", "low"); err != nil {
		t.Fatal(err)
	}
	resp, err := providertest.Generate(t.Context(), s, agentRequest(s.Name()))
	if err != nil {
		t.Fatal(err)
	}
	if resp.CustomMetadata[hook.ServedByKey] != "gpt-4.1-nano" {
		t.Errorf("served by %v, want the fallback gpt-4.1-nano", resp.CustomMetadata[hook.ServedByKey])
	}
	if got := down.Requests(); len(got) == 0 || got[0].Body["reasoning_effort"] != "low" {
		t.Errorf("backup got %v, want requests with reasoning_effort low", got)
	}
	if got := cheap.Requests(); len(got) != 1 || got[0].Body["reasoning_effort"] != nil {
		t.Errorf("the fallback got %v, want one request with its own (no) reasoning", got)
	}
}

// A switched-to model's failure names it (ServedError), reads as its own
// error, and is still an outage when its provider is down.
func TestSwitchedModelErrorsNameIt(t *testing.T) {
	t.Parallel()
	main := providertest.NewServer(t, providertest.Reply(200, mainReply))
	down := providertest.NewServer(t, providertest.Reply(503, overloaded))
	s := newSwitch(t, map[string]config.Model{"main": openaiDef(main, "gpt-4.1", ""), "backup": openaiDef(down, "o4-mini", "")})
	if _, _, err := s.Use("backup", ""); err != nil {
		t.Fatal(err)
	}
	_, err := providertest.Generate(t.Context(), s, agentRequest(s.Name()))
	var served *ServedError
	if !errors.As(err, &served) || served.ServedBy() != "o4-mini" || !outage.Is(err) || err.Error() != served.Err.Error() {
		t.Fatalf("error %v: want a ServedError naming o4-mini that is still an outage", err)
	}
}
