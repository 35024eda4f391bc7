package anthropic

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/adk/model"
	"google.golang.org/adk/session"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/models/internal/providersuite"
	"github.com/agent-worker/agent-worker/models/internal/providertest"
	"github.com/agent-worker/agent-worker/models/retry"
)

const testKey = "sk-ant-api03-test0123456789SECRET"

// The bodies below follow the Messages API reference (POST /v1/messages):
// a "message" object with content blocks, stop_reason and usage, and the
// error shape {"type": "error", "error": {"type", "message"}}.

const toolUseReply = `{
  "id": "msg_01Aq9w938a90dw8q",
  "type": "message",
  "role": "assistant",
  "model": "claude-sonnet-4-5-20250929",
  "content": [
    {"type": "text", "text": "I'll look up the weather in Paris."},
    {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather", "input": {"city": "Paris"}}
  ],
  "stop_reason": "tool_use",
  "stop_sequence": null,
  "usage": {"input_tokens": 472, "cache_creation_input_tokens": 2048, "cache_read_input_tokens": 0, "output_tokens": 89}
}`

const textReply = `{
  "id": "msg_01Bq9w938a90dw8r",
  "type": "message",
  "role": "assistant",
  "model": "claude-sonnet-4-5-20250929",
  "content": [{"type": "text", "text": "It is 18°C and sunny in Paris."}],
  "stop_reason": "end_turn",
  "stop_sequence": null,
  "usage": {"input_tokens": 100, "cache_creation_input_tokens": 300, "cache_read_input_tokens": 2000, "output_tokens": 50}
}`

func errorBody(typ, msg string) string {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}, "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"})
	return string(b)
}

func newModel(_ context.Context, url string, pol retry.Policy, log *slog.Logger) (model.LLM, error) {
	return New(Options{
		Model:   "claude-sonnet-4-5",
		BaseURL: url,
		APIKey:  testKey,
		Headers: map[string]string{"anthropic-beta": "token-efficient-tools-2025-02-19"},
		Retry:   pol,
		Log:     log,
	})
}

// checkToolTurn checks the Messages API side of the suite's tool turn:
// the text before the tool_use, usage and cache writes, the headers and
// bodies of the requests, and the tool_result going back.
func checkToolTurn(t *testing.T, events []*session.Event, reqs []providertest.Received) {
	first := events[0].Content.Parts
	if len(first) != 2 || first[0].Text != "I'll look up the weather in Paris." ||
		first[1].FunctionCall.ID != "toolu_01A09q90qw90lq917835lq9" || first[1].FunctionCall.Args["city"] != "Paris" {
		t.Errorf("first model event parts = %s", providertest.JS(first))
	}
	if u := events[0].UsageMetadata; u == nil || u.PromptTokenCount != 472+2048 {
		t.Errorf("first event usage = %+v", u)
	}
	if cw := events[0].CustomMetadata[CacheWriteKey]; cw != 2048 {
		t.Errorf("first event cache writes = %v, want 2048", cw)
	}

	wantTools := []any{map[string]any{
		"name":         "get_weather",
		"description":  "Current weather for a city.",
		"input_schema": providersuite.WeatherParameters(),
	}}
	for i, rq := range reqs {
		if got := rq.Header.Get("Authorization"); got != "" {
			t.Errorf("request %d: Authorization = %q, want none (the key goes in x-api-key)", i, got)
		}
		if got := rq.Header.Get("Anthropic-Version"); got != "2023-06-01" {
			t.Errorf("request %d: anthropic-version = %q", i, got)
		}
		if rq.Body["model"] != "claude-sonnet-4-5" || rq.Body["max_tokens"] != float64(DefaultMaxTokens) {
			t.Errorf("request %d: model %v max_tokens %v", i, rq.Body["model"], rq.Body["max_tokens"])
		}
		sys, _ := rq.Body["system"].([]any)
		if len(sys) != 1 || !strings.HasPrefix(fmt.Sprint(sys[0].(map[string]any)["text"]), "You answer weather questions.") {
			t.Errorf("request %d: system = %s", i, providertest.JS(rq.Body["system"]))
		}
		if !reflect.DeepEqual(rq.Body["tools"], wantTools) {
			t.Errorf("request %d: tools =\n%s\nwant\n%s", i, providertest.JS(rq.Body["tools"]), providertest.JS(wantTools))
		}
	}

	// The second request carries the exchange: the assistant's tool_use,
	// then a user message whose tool_result answers it.
	wantMsgs := []any{
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "Weather in Paris?"}}},
		map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "text", "text": "I'll look up the weather in Paris."},
			map[string]any{"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather", "input": map[string]any{"city": "Paris"}},
		}},
		map[string]any{"role": "user", "content": []any{map[string]any{
			"type": "tool_result", "tool_use_id": "toolu_01A09q90qw90lq917835lq9", "is_error": false,
			"content": []any{map[string]any{"type": "text", "text": `{"condition":"sunny","temp_c":18}`}},
		}}},
	}
	if got := reqs[1].Body["messages"]; !reflect.DeepEqual(got, wantMsgs) {
		t.Errorf("second request messages =\n%s\nwant\n%s", providertest.JS(got), providertest.JS(wantMsgs))
	}
}

// TestConformance runs the cases every provider shares on Messages API
// replies.
func TestConformance(t *testing.T) {
	t.Parallel()
	badRequest := "messages.1.content.0.tool_result.tool_use_id: unexpected `tool_use_id` found in `tool_result` blocks"
	providersuite.Run(t, providersuite.Provider{
		New:        newModel,
		Key:        testKey,
		AuthHeader: "X-Api-Key",
		AuthValue:  testKey,
		OK:         providertest.Reply(200, textReply),
		Usage: providersuite.Usage{
			Want: genai.GenerateContentResponseUsageMetadata{
				PromptTokenCount:        2400, // 100 uncached + 2000 read + 300 written
				CachedContentTokenCount: 2000,
				CandidatesTokenCount:    50,
				TotalTokenCount:         2450,
			},
			ModelVersion: "claude-sonnet-4-5-20250929",
			Also: func(t *testing.T, resp *model.LLMResponse) {
				if cw, ok := resp.CustomMetadata[CacheWriteKey].(int); !ok || cw != 300 {
					t.Errorf("custom metadata = %v, want %s: 300 (int)", resp.CustomMetadata, CacheWriteKey)
				}
			},
			Guard: guard.Usage{Input: 2400, CachedInput: 2000, CacheWrite: 300, Output: 50},
			// At list price: $3 in, $0.30 cache read, $3.75 cache write,
			// $15 out per million.
			Cost: (100*3 + 2000*0.30 + 300*3.75 + 50*15) / 1e6,
		},
		RateLimited: []providersuite.Named{{Name: "Retry-After header", Reply: providertest.Reply(429,
			errorBody("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"), "Retry-After", "2")}},
		ServerError: providersuite.Failure{
			Replies: []http.HandlerFunc{
				providertest.Reply(529, errorBody("overloaded_error", "Overloaded")),
				providertest.Reply(500, errorBody("api_error", "Internal server error")),
			},
			Err: "anthropic: 500 Internal Server Error (api_error): Internal server error (gave up after 3 attempts)",
		},
		BadRequest: providersuite.BadRequest{
			Reply:   providertest.Reply(400, errorBody("invalid_request_error", badRequest)),
			Message: badRequest,
			Err:     "anthropic: 400 Bad Request (invalid_request_error): " + badRequest,
		},
		KeyInError: providersuite.Failure{
			Replies: []http.HandlerFunc{
				providertest.Reply(503, errorBody("api_error", "upstream failed for "+testKey)),
				providertest.Reply(401, errorBody("authentication_error", "invalid x-api-key "+testKey)),
			},
			Err: "anthropic: 401 Unauthorized (authentication_error): invalid x-api-key [redacted]",
		},
		BadToolCall: &providersuite.BadToolCall{
			Reply: providertest.Reply(200, strings.Replace(toolUseReply, `"input": {"city": "Paris"}`, `"input": ["Paris"]`, 1)),
			Err:   `tool_use "get_weather": input is not a JSON object`,
		},
		ToolTurn: providersuite.ToolTurn{
			Run:      providertest.WeatherTurn,
			Describe: providertest.Describe,
			App:      "anthropic-test",
			Call:     providertest.Reply(200, toolUseReply),
			Path:     "/v1/messages",
			Header:   [2]string{"Anthropic-Beta", "token-efficient-tools-2025-02-19"},
			Check:    checkToolTurn,
		},
	})
}

func TestRequestMapping(t *testing.T) {
	t.Parallel()
	req := &model.LLMRequest{
		Contents: []*genai.Content{
			genai.NewContentFromText("first", genai.RoleUser),
			genai.NewContentFromText("second, same role", genai.RoleUser),
			{Role: genai.RoleModel, Parts: []*genai.Part{
				{Text: "thinking...", Thought: true},
				{FunctionCall: &genai.FunctionCall{ID: "t1", Name: "lookup", Args: map[string]any{"q": "a"}}},
			}},
			{Role: genai.RoleModel, Parts: []*genai.Part{
				{FunctionCall: &genai.FunctionCall{ID: "t2", Name: "lookup"}},
			}},
			{Role: genai.RoleUser, Parts: []*genai.Part{
				{FunctionResponse: &genai.FunctionResponse{ID: "t1", Name: "lookup", Response: map[string]any{"result": 1}}},
			}},
			{Role: genai.RoleUser, Parts: []*genai.Part{
				{Text: "and a note"},
				{FunctionResponse: &genai.FunctionResponse{ID: "t2", Name: "lookup", Response: map[string]any{"error": "boom"}}},
			}},
		},
		Config: &genai.GenerateContentConfig{
			MaxOutputTokens: 256,
			StopSequences:   []string{"END"},
			Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{
				{Name: "lookup", Parameters: &genai.Schema{Type: genai.TypeObject, Required: []string{"q"},
					Properties: map[string]*genai.Schema{"q": {Type: genai.TypeString}}}},
				{Name: "now"},
			}}},
			ToolConfig: &genai.ToolConfig{FunctionCallingConfig: &genai.FunctionCallingConfig{
				Mode: genai.FunctionCallingConfigModeAny, AllowedFunctionNames: []string{"lookup"}}},
		},
	}
	p, err := messageParams("m", 4096, 0, req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(p)
	var got map[string]any
	_ = json.Unmarshal(raw, &got)
	text := func(s string) map[string]any { return map[string]any{"type": "text", "text": s} }
	want := map[string]any{
		"model":          "m",
		"max_tokens":     float64(256),
		"stop_sequences": []any{"END"},
		"tool_choice":    map[string]any{"type": "tool", "name": "lookup"},
		"messages": []any{
			map[string]any{"role": "user", "content": []any{text("first"), text("second, same role")}},
			map[string]any{"role": "assistant", "content": []any{
				map[string]any{"type": "tool_use", "id": "t1", "name": "lookup", "input": map[string]any{"q": "a"}},
				map[string]any{"type": "tool_use", "id": "t2", "name": "lookup", "input": map[string]any{}},
			}},
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "tool_result", "tool_use_id": "t1", "is_error": false, "content": []any{text(`{"result":1}`)}},
				map[string]any{"type": "tool_result", "tool_use_id": "t2", "is_error": true, "content": []any{text(`{"error":"boom"}`)}},
				text("and a note"),
			}},
		},
		"tools": []any{
			map[string]any{"name": "lookup", "input_schema": map[string]any{
				"type": "object", "required": []any{"q"}, "properties": map[string]any{"q": map[string]any{"type": "string"}}}},
			map[string]any{"name": "now", "input_schema": map[string]any{"type": "object", "properties": map[string]any{}}},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("request =\n%s\nwant\n%s", providertest.JS(got), providertest.JS(want))
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	for _, o := range []Options{
		{},
		{Model: "m"},
		{Model: "m", APIKey: "k", BaseURL: "api.anthropic.com"},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) = nil error", o)
		}
	}
}
