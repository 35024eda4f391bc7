package models

import (
	"bytes"
	"context"
	"errors"
	"iter"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/adk/model"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/models/internal/providertest"
	"github.com/agent-worker/agent-worker/outage"
)

// Bodies as the Chat Completions API sends them (POST /v1/chat/completions).
const (
	overloaded = `{"error": {"message": "The server is overloaded.", "type": "server_error", "param": null, "code": null}}`
	badRequest = `{"error": {"message": "maximum context length exceeded", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}`
	cheapReply = `{
  "id": "chatcmpl-fallback1", "object": "chat.completion", "created": 1741570284, "model": "gpt-4.1-nano-2025-04-14",
  "choices": [{"index": 0, "message": {"role": "assistant", "content": "disk full on db-1: rotate the logs", "refusal": null, "annotations": []},
    "logprobs": null, "finish_reason": "stop"}],
  "usage": {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100,
    "prompt_tokens_details": {"cached_tokens": 0}, "completion_tokens_details": {"reasoning_tokens": 0}}
}`
)

// openaiDef is an OpenAI model served by f, retried twice with
// millisecond backoffs.
func openaiDef(f *providertest.Server, name, fallback string) config.Model {
	two := 2
	return config.Model{Provider: "openai", Model: name, BaseURL: f.URL + "/v1", Fallback: fallback,
		Retry: config.Retry{Max: &two, Base: config.Duration(1e6), MaxWait: config.Duration(1e6)}}
}

// watch collects the bus's events of type typ.
func watch(t *testing.T, bus *events.Bus, typ string) func() []events.Event {
	sub := bus.Subscribe(100, func(e events.Event) bool { return e.Type == typ })
	t.Cleanup(sub.Close)
	return func() []events.Event {
		var out []events.Event
		for {
			select {
			case e := <-sub.C:
				out = append(out, e)
			default:
				return out
			}
		}
	}
}

// agentRequest is a request as ADK sends it: Model is the agent's model.
func agentRequest(name string) *model.LLMRequest {
	return &model.LLMRequest{Model: name, Contents: []*genai.Content{genai.NewContentFromText("disk full on db-1", genai.RoleUser)}}
}

func TestFallbackAfterRetriesExhausted(t *testing.T) {
	t.Parallel()
	primary := providertest.NewServer(t, providertest.Reply(503, overloaded))
	cheap := providertest.NewServer(t, providertest.Reply(200, cheapReply))
	var logs bytes.Buffer
	bus := events.NewBus(0, nil)
	fallbacks := watch(t, bus, EventFallback)
	retries := watch(t, bus, EventRetry)
	defs := map[string]config.Model{"main": openaiDef(primary, "gpt-4.1", "cheap"), "cheap": openaiDef(cheap, "gpt-4.1-nano", "")}

	m, err := NewWithFallbacks(t.Context(), "main", defs, Env{Agent: "triage", Events: bus, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if m.Name() != "gpt-4.1" || !reflect.DeepEqual(FallbackNames(m), []string{"gpt-4.1-nano"}) {
		t.Fatalf("Name %q, FallbackNames %q", m.Name(), FallbackNames(m))
	}
	resp, err := providertest.Generate(t.Context(), m, agentRequest(m.Name()))
	if err != nil {
		t.Fatalf("call = %v, want the fallback's answer", err)
	}
	if got := resp.Content.Parts[0].Text; got != "disk full on db-1: rotate the logs" {
		t.Errorf("answer = %q", got)
	}
	if resp.CustomMetadata[hook.ServedByKey] != "gpt-4.1-nano" || resp.UsageMetadata.PromptTokenCount != 1000 {
		t.Errorf("custom metadata %v usage %+v: want served_by gpt-4.1-nano and the fallback's usage", resp.CustomMetadata, resp.UsageMetadata)
	}
	if n := len(primary.Requests()); n != 3 {
		t.Errorf("primary got %d requests, want 3 (1 + 2 retries)", n)
	}
	got := cheap.Requests()
	if len(got) != 1 || got[0].Body["model"] != "gpt-4.1-nano" {
		t.Fatalf("fallback got %d requests (%v), want one for its own model gpt-4.1-nano", len(got), got)
	}
	evs := fallbacks()
	if len(evs) != 1 || evs[0].Agent != "triage" || evs[0].Data["model"] != "gpt-4.1" || evs[0].Data["fallback"] != "gpt-4.1-nano" ||
		!strings.Contains(evs[0].Data["error"].(string), "503") {
		t.Errorf("fallback events = %+v", evs)
	}
	if n := len(retries()); n != 2 {
		t.Errorf("%d retry events, want 2 (the primary's)", n)
	}
	if !strings.Contains(logs.String(), `level=WARN msg="model unavailable, retries exhausted: the call goes to its fallback" agent=triage model=gpt-4.1 fallback=gpt-4.1-nano`) {
		t.Errorf("log lacks the fallback warning:\n%s", logs.String())
	}
}

// A fallback that fails too leaves the call failed as an outage of the
// primary (the turn waits; its messages are not blamed), naming both.
func TestFallbackThatFailsToo(t *testing.T) {
	t.Parallel()
	primary := providertest.NewServer(t, providertest.Reply(503, overloaded))
	cheap := providertest.NewServer(t, providertest.Reply(400, badRequest))
	defs := map[string]config.Model{"main": openaiDef(primary, "gpt-4.1", "cheap"), "cheap": openaiDef(cheap, "gpt-4.1-nano", "")}
	m, err := NewWithFallbacks(t.Context(), "main", defs, Env{Agent: "triage"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = providertest.Generate(t.Context(), m, agentRequest(m.Name()))
	if !outage.Is(err) || outage.Dependency(err) != "model provider" {
		t.Fatalf("error %v: want an outage of the model provider", err)
	}
	for _, want := range []string{"openai: 503 Service Unavailable (server_error): The server is overloaded.", "fallback gpt-4.1-nano failed too",
		"openai: 400 Bad Request (invalid_request_error): maximum context length exceeded"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// Only an outage falls back: a request the primary refuses fails as it is,
// and the fallback is never asked.
func TestNoFallbackForARefusedRequest(t *testing.T) {
	t.Parallel()
	primary := providertest.NewServer(t, providertest.Reply(400, badRequest))
	cheap := providertest.NewServer(t, providertest.Reply(200, cheapReply))
	bus := events.NewBus(0, nil)
	fallbacks := watch(t, bus, EventFallback)
	defs := map[string]config.Model{"main": openaiDef(primary, "gpt-4.1", "cheap"), "cheap": openaiDef(cheap, "gpt-4.1-nano", "")}
	m, err := NewWithFallbacks(t.Context(), "main", defs, Env{Agent: "triage", Events: bus})
	if err != nil {
		t.Fatal(err)
	}
	_, err = providertest.Generate(t.Context(), m, agentRequest(m.Name()))
	if err == nil || outage.Is(err) || !strings.Contains(err.Error(), "400 Bad Request") {
		t.Fatalf("error = %v, want the primary's 400, not an outage", err)
	}
	if n := len(cheap.Requests()); n != 0 || len(fallbacks()) != 0 {
		t.Errorf("fallback asked %d times, %d events; want none", n, len(fallbacks()))
	}
}

// A chain goes on to the next fallback; the model that answered names
// itself, and each hop is announced.
func TestFallbackChain(t *testing.T) {
	t.Parallel()
	primary := providertest.NewServer(t, providertest.Reply(503, overloaded))
	mid := providertest.NewServer(t, providertest.Reply(429, `{"error": {"message": "Rate limit reached", "type": "rate_limit_error"}}`))
	cheap := providertest.NewServer(t, providertest.Reply(200, cheapReply))
	bus := events.NewBus(0, nil)
	fallbacks := watch(t, bus, EventFallback)
	defs := map[string]config.Model{
		"main":  openaiDef(primary, "gpt-4.1", "mid"),
		"mid":   openaiDef(mid, "gpt-4.1-mini", "cheap"),
		"cheap": openaiDef(cheap, "gpt-4.1-nano", ""),
	}
	m, err := NewWithFallbacks(t.Context(), "main", defs, Env{Agent: "triage", Events: bus})
	if err != nil {
		t.Fatal(err)
	}
	if got := FallbackNames(m); !reflect.DeepEqual(got, []string{"gpt-4.1-mini", "gpt-4.1-nano"}) {
		t.Errorf("FallbackNames = %q", got)
	}
	resp, err := providertest.Generate(t.Context(), m, agentRequest(m.Name()))
	if err != nil {
		t.Fatal(err)
	}
	if resp.CustomMetadata[hook.ServedByKey] != "gpt-4.1-nano" {
		t.Errorf("served by %v, want gpt-4.1-nano", resp.CustomMetadata[hook.ServedByKey])
	}
	var hops []string
	for _, e := range fallbacks() {
		hops = append(hops, e.Data["model"].(string)+"→"+e.Data["fallback"].(string))
	}
	if !reflect.DeepEqual(hops, []string{"gpt-4.1→gpt-4.1-mini", "gpt-4.1-mini→gpt-4.1-nano"}) {
		t.Errorf("fallback events %q", hops)
	}
}

func TestWithFallbacksRefusesLoops(t *testing.T) {
	t.Parallel()
	defs := map[string]config.Model{
		"a": {Provider: "scripted", Behaviour: "demo", Fallback: "b"},
		"b": {Provider: "scripted", Behaviour: "demo", Fallback: "a"},
		"c": {Provider: "scripted", Behaviour: "demo", Fallback: "nope"},
	}
	if _, err := NewWithFallbacks(t.Context(), "a", defs, Env{}); err == nil || !strings.Contains(err.Error(), `fallbacks loop back to "a"`) {
		t.Errorf("loop: %v", err)
	}
	if _, err := NewWithFallbacks(t.Context(), "c", defs, Env{}); err == nil || !strings.Contains(err.Error(), `"nope": not defined`) {
		t.Errorf("unknown: %v", err)
	}
	if _, err := New(t.Context(), "s", config.Model{Provider: "scripted", Behaviour: "demo", Reasoning: "low"}, Env{}); err == nil {
		t.Error("a scripted model with reasoning was built")
	}
}

// stub is a model.LLM that yields its responses, then err (if any), and
// counts its calls.
type stub struct {
	name  string
	resps []*model.LLMResponse
	err   error
	calls int
	ctx   func() // run at the start of a call
}

func (s *stub) Name() string { return s.name }
func (s *stub) GenerateContent(_ context.Context, _ *model.LLMRequest, _ bool) iter.Seq2[*model.LLMResponse, error] {
	return func(yield func(*model.LLMResponse, error) bool) {
		s.calls++
		if s.ctx != nil {
			s.ctx()
		}
		for _, r := range s.resps {
			if !yield(r, nil) {
				return
			}
		}
		if s.err != nil {
			yield(nil, s.err)
		}
	}
}

// No fallback once the primary has streamed part of an answer, nor when
// the turn was cancelled: an outage error then goes back as it is.
func TestNoFallbackAfterPartialOrCancel(t *testing.T) {
	t.Parallel()
	down := outage.Mark("model provider", errors.New("gemini: 503 Service Unavailable"))
	partial := &model.LLMResponse{Partial: true, Content: genai.NewContentFromText("It is", genai.RoleModel)}

	fb := &stub{name: "cheap", resps: []*model.LLMResponse{{Content: genai.NewContentFromText("ok", genai.RoleModel)}}}
	m := NewFallback(&stub{name: "main", resps: []*model.LLMResponse{partial}, err: down}, fb, Env{})
	var got []error
	n := 0
	for _, err := range m.GenerateContent(t.Context(), agentRequest("main"), true) {
		n++
		got = append(got, err)
	}
	if n != 2 || got[0] != nil || !errors.Is(got[1], down) || fb.calls != 0 {
		t.Errorf("partial then outage: %d yields %v, fallback called %d times; want the partial, then the outage, no fallback", n, got, fb.calls)
	}

	ctx, cancel := context.WithCancel(t.Context())
	m = NewFallback(&stub{name: "main", err: down, ctx: cancel}, fb, Env{})
	if _, err := providertest.Generate(ctx, m, agentRequest("main")); !errors.Is(err, down) || fb.calls != 0 {
		t.Errorf("cancelled: %v, fallback called %d times; want the primary's error, no fallback", err, fb.calls)
	}

	// A streamed fallback's every response names it; the request it gets
	// has no model name.
	var seen *model.LLMRequest
	fb2 := &stub{name: "cheap", resps: []*model.LLMResponse{partial, {Content: genai.NewContentFromText("It is 18°C", genai.RoleModel)}}}
	m = NewFallback(&stub{name: "main", err: down}, &recordingLLM{LLM: fb2, req: &seen}, Env{})
	for resp, err := range m.GenerateContent(t.Context(), agentRequest("main"), true) {
		if err != nil || resp.CustomMetadata[hook.ServedByKey] != "cheap" {
			t.Errorf("streamed fallback response %+v, %v", resp, err)
		}
	}
	if seen == nil || seen.Model != "" || partial.CustomMetadata != nil {
		t.Errorf("fallback request %+v; the fallback's own responses must not be changed (%v)", seen, partial.CustomMetadata)
	}
}

type recordingLLM struct {
	model.LLM
	req **model.LLMRequest
}

func (r *recordingLLM) GenerateContent(ctx context.Context, req *model.LLMRequest, stream bool) iter.Seq2[*model.LLMResponse, error] {
	*r.req = req
	return r.LLM.GenerateContent(ctx, req, stream)
}
