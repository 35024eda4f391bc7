package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/adk/model"
	"google.golang.org/adk/session"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/models/internal/providersuite"
	"github.com/agent-worker/agent-worker/models/internal/providertest"
	"github.com/agent-worker/agent-worker/models/retry"
)

const testKey = "sk-test-0123456789abcdefSECRET"

// The bodies below follow the Chat Completions API reference
// (POST /v1/chat/completions): response object "chat.completion", error
// object {"error": {"message", "type", "param", "code"}}.

const toolCallReply = `{
  "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
  "object": "chat.completion",
  "created": 1741570283,
  "model": "gpt-4.1-mini-2025-04-14",
  "choices": [{
    "index": 0,
    "message": {
      "role": "assistant",
      "content": null,
      "tool_calls": [{
        "id": "call_DdmO9pD3xa9XTPNJ32zg2hcA",
        "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}
      }],
      "refusal": null,
      "annotations": []
    },
    "logprobs": null,
    "finish_reason": "tool_calls"
  }],
  "usage": {
    "prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99,
    "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
  },
  "service_tier": "default",
  "system_fingerprint": "fp_6ec83003ad"
}`

const textReply = `{
  "id": "chatcmpl-B9MHEq2a6k1bVqGJbE9z8C2Ts0m1F",
  "object": "chat.completion",
  "created": 1741570284,
  "model": "gpt-4.1-mini-2025-04-14",
  "choices": [{
    "index": 0,
    "message": {"role": "assistant", "content": "It is 18°C and sunny in Paris.", "refusal": null, "annotations": []},
    "logprobs": null,
    "finish_reason": "stop"
  }],
  "usage": {
    "prompt_tokens": 1200, "completion_tokens": 300, "total_tokens": 1500,
    "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 100, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
  },
  "service_tier": "default",
  "system_fingerprint": "fp_6ec83003ad"
}`

func errorBody(msg, typ string) string {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
	return string(b)
}

func newModel(_ context.Context, url string, pol retry.Policy, log *slog.Logger) (model.LLM, error) {
	return New(Options{
		Model:   "gpt-4.1-mini",
		BaseURL: url + "/v1",
		APIKey:  testKey,
		Headers: map[string]string{"X-Team": "payments"},
		Retry:   pol,
		Log:     log,
	})
}

// checkToolTurn checks the Chat Completions side of the suite's tool
// turn: the call's id, usage, the request bodies, and the tool result
// going back as a "tool" message.
func checkToolTurn(t *testing.T, events []*session.Event, reqs []providertest.Received) {
	if fc := events[0].Content.Parts[0].FunctionCall; fc.ID != "call_DdmO9pD3xa9XTPNJ32zg2hcA" || fc.Args["city"] != "Paris" {
		t.Errorf("function call = %+v, want the server's id and args", fc)
	}
	if u := events[2].UsageMetadata; u == nil || u.PromptTokenCount != 1200 || u.CachedContentTokenCount != 1024 {
		t.Errorf("final event usage = %+v", u)
	}
	for i, rq := range reqs {
		if rq.Body["model"] != "gpt-4.1-mini" {
			t.Errorf("request %d: model = %v", i, rq.Body["model"])
		}
		// Tool declarations: name, description and JSON schema.
		wantTools := []any{map[string]any{
			"type": "function",
			"function": map[string]any{
				"name":        "get_weather",
				"description": "Current weather for a city.",
				"parameters":  providersuite.WeatherParameters(),
			},
		}}
		if !reflect.DeepEqual(rq.Body["tools"], wantTools) {
			t.Errorf("request %d: tools =\n%s\nwant\n%s", i, providertest.JS(rq.Body["tools"]), providertest.JS(wantTools))
		}
	}

	// The second request carries the whole exchange, the tool result as a
	// "tool" message answering the assistant's tool call.
	msgs, _ := reqs[1].Body["messages"].([]any)
	if len(msgs) != 4 {
		t.Fatalf("second request has %d messages, want 4:\n%s", len(msgs), providertest.JS(msgs))
	}
	wantMsgs := []any{
		map[string]any{"role": "system", "content": "You answer weather questions."},
		map[string]any{"role": "user", "content": "Weather in Paris?"},
		map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{
			"id": "call_DdmO9pD3xa9XTPNJ32zg2hcA", "type": "function",
			"function": map[string]any{"name": "get_weather", "arguments": `{"city":"Paris"}`},
		}}},
		map[string]any{"role": "tool", "tool_call_id": "call_DdmO9pD3xa9XTPNJ32zg2hcA", "content": `{"condition":"sunny","temp_c":18}`},
	}
	for i := range wantMsgs {
		got := msgs[i].(map[string]any)
		if strings.HasPrefix(fmt.Sprint(got["content"]), "You answer") {
			// ADK may add its own lines to the instruction; the operator's comes first.
			got = map[string]any{"role": got["role"], "content": strings.SplitN(got["content"].(string), "\n", 2)[0]}
		}
		if !reflect.DeepEqual(got, wantMsgs[i]) {
			t.Errorf("second request messages[%d] =\n%s\nwant\n%s", i, providertest.JS(got), providertest.JS(wantMsgs[i]))
		}
	}
}

// TestConformance runs the cases every provider shares on Chat
// Completions replies.
func TestConformance(t *testing.T) {
	t.Parallel()
	serverError := "The server had an error while processing your request. Sorry about that!"
	keyHelp := "You can find your API key at https://platform.openai.com/account/api-keys."
	badRequest := "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified."
	providersuite.Run(t, providersuite.Provider{
		New:        newModel,
		Key:        testKey,
		AuthHeader: "Authorization",
		AuthValue:  "Bearer " + testKey,
		OK:         providertest.Reply(200, textReply),
		Usage: providersuite.Usage{
			Want: genai.GenerateContentResponseUsageMetadata{
				PromptTokenCount:        1200,
				CachedContentTokenCount: 1024,
				CandidatesTokenCount:    200, // completion_tokens minus reasoning
				ThoughtsTokenCount:      100,
				TotalTokenCount:         1500,
			},
			ModelVersion: "gpt-4.1-mini-2025-04-14",
			Guard:        guard.Usage{Input: 1200, CachedInput: 1024, Output: 300},
			// At list price: $0.40 in, $0.10 cached, $1.60 out per million.
			Cost: (176*0.40 + 1024*0.10 + 300*1.60) / 1e6,
		},
		RateLimited: []providersuite.Named{{Name: "Retry-After header", Reply: providertest.Reply(429,
			errorBody("Rate limit reached for gpt-4.1-mini on requests per min (RPM): Limit 3, Used 3.", "requests"), "Retry-After", "2")}},
		ServerError: providersuite.Failure{
			Replies: []http.HandlerFunc{providertest.Reply(500, errorBody(serverError, "server_error"))},
			Err:     "openai: 500 Internal Server Error (server_error): " + serverError + " (gave up after 3 attempts)",
		},
		BadRequest: providersuite.BadRequest{
			Reply:   providertest.Reply(400, errorBody(badRequest, "invalid_request_error")),
			Message: badRequest,
			Err:     "openai: 400 Bad Request (invalid_request_error): " + badRequest,
		},
		KeyInError: providersuite.Failure{
			Replies: []http.HandlerFunc{
				providertest.Reply(500, errorBody("upstream failed for key "+testKey, "server_error")),
				providertest.Reply(401, errorBody("Incorrect API key provided: "+testKey+". "+keyHelp, "invalid_request_error")),
			},
			Err: "openai: 401 Unauthorized (invalid_request_error): Incorrect API key provided: [redacted]. " + keyHelp,
		},
		BadToolCall: &providersuite.BadToolCall{
			Reply: providertest.Reply(200, strings.Replace(toolCallReply, `{\"city\":\"Paris\"}`, `{\"city\":`, 1)),
			Err:   `"get_weather": arguments are not a JSON object`,
		},
		ToolTurn: providersuite.ToolTurn{
			Run:      providertest.WeatherTurn,
			Describe: providertest.Describe,
			App:      "openai-test",
			Call:     providertest.Reply(200, toolCallReply),
			Path:     "/v1/chat/completions",
			Header:   [2]string{"X-Team", "payments"},
			Check:    checkToolTurn,
		},
	})
}

func TestAttemptTimeoutRetried(t *testing.T) {
	t.Parallel()
	f := providertest.NewServer(t,
		func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() },
		providertest.Reply(200, textReply),
	)
	var a providertest.Attempts
	m, err := New(Options{Model: "gpt-4.1-mini", BaseURL: f.URL + "/v1", Timeout: 50 * time.Millisecond, Retry: a.Policy(2)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := providertest.Generate(t.Context(), m, providertest.UserRequest("hi")); err != nil {
		t.Fatalf("error = %v, want success on the second attempt", err)
	}
	if _, outcomes := a.Snapshot(); !reflect.DeepEqual(outcomes, []string{"retry", "ok"}) {
		t.Errorf("outcomes = %q", outcomes)
	}
}

func TestCompatibleServerWithoutKey(t *testing.T) {
	t.Parallel()
	// Ollama's answer: no usage details, a tool call with an empty id.
	ollama := `{"id":"chatcmpl-522","object":"chat.completion","created":1741570000,"model":"llama3.1:8b","system_fingerprint":"fp_ollama",
	  "choices":[{"index":0,"message":{"role":"assistant","content":"","tool_calls":[{"id":"","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},"finish_reason":"tool_calls"}],
	  "usage":{"prompt_tokens":50,"completion_tokens":12,"total_tokens":62}}`
	f := providertest.NewServer(t, providertest.Reply(200, ollama))
	m, err := New(Options{Model: "llama3.1:8b", BaseURL: f.URL + "/v1/"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := providertest.Generate(t.Context(), m, providertest.UserRequest("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if h := f.Requests()[0].Header.Get("Authorization"); h != "" {
		t.Errorf("Authorization = %q, want none without a key", h)
	}
	fc := resp.Content.Parts[0].FunctionCall
	if fc == nil || !strings.HasPrefix(fc.ID, "call_") || fc.Args["city"] != "Oslo" {
		t.Errorf("function call = %+v, want a generated call_ id", fc)
	}
	if u := resp.UsageMetadata; u.PromptTokenCount != 50 || u.CandidatesTokenCount != 12 || u.TotalTokenCount != 62 {
		t.Errorf("usage = %+v", u)
	}
}

func TestRequestMapping(t *testing.T) {
	t.Parallel()
	temp := float32(0.2)
	req := &model.LLMRequest{
		Contents: []*genai.Content{
			genai.NewContentFromText("first", genai.RoleUser),
			{Role: genai.RoleModel, Parts: []*genai.Part{
				{Text: "thinking...", Thought: true},
				{Text: "Let me check both."},
				{FunctionCall: &genai.FunctionCall{ID: "c1", Name: "lookup", Args: map[string]any{"q": "a"}}},
				{FunctionCall: &genai.FunctionCall{ID: "c2", Name: "lookup", Args: map[string]any{"q": "b"}}},
			}},
			{Role: genai.RoleUser, Parts: []*genai.Part{
				{FunctionResponse: &genai.FunctionResponse{ID: "c1", Name: "lookup", Response: map[string]any{"result": 1}}},
				{FunctionResponse: &genai.FunctionResponse{ID: "c2", Name: "lookup", Response: map[string]any{"error": "boom"}}},
			}},
		},
		Config: &genai.GenerateContentConfig{
			Temperature:     &temp,
			MaxOutputTokens: 256,
			StopSequences:   []string{"END"},
			Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{
				Name: "lookup",
				Parameters: &genai.Schema{
					Type:     genai.TypeObject,
					Required: []string{"q"},
					Properties: map[string]*genai.Schema{
						"q":    {Type: genai.TypeString, Description: "query"},
						"tags": {Type: genai.TypeArray, Items: &genai.Schema{Type: genai.TypeString}, Nullable: genai.Ptr(true)},
					},
				},
			}}}},
			ToolConfig: &genai.ToolConfig{FunctionCallingConfig: &genai.FunctionCallingConfig{Mode: genai.FunctionCallingConfigModeAny}},
		},
	}
	p, err := chatParams("m", "", req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(p)
	var got map[string]any
	_ = json.Unmarshal(raw, &got)
	want := map[string]any{
		"model":                 "m",
		"temperature":           0.2,
		"max_completion_tokens": float64(256),
		"stop":                  []any{"END"},
		"tool_choice":           "required",
		"messages": []any{
			map[string]any{"role": "user", "content": "first"},
			map[string]any{"role": "assistant", "content": "Let me check both.", "tool_calls": []any{
				map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "lookup", "arguments": `{"q":"a"}`}},
				map[string]any{"id": "c2", "type": "function", "function": map[string]any{"name": "lookup", "arguments": `{"q":"b"}`}},
			}},
			map[string]any{"role": "tool", "tool_call_id": "c1", "content": `{"result":1}`},
			map[string]any{"role": "tool", "tool_call_id": "c2", "content": `{"error":"boom"}`},
		},
		"tools": []any{map[string]any{"type": "function", "function": map[string]any{
			"name": "lookup",
			"parameters": map[string]any{
				"type":     "object",
				"required": []any{"q"},
				"properties": map[string]any{
					"q":    map[string]any{"type": "string", "description": "query"},
					"tags": map[string]any{"type": []any{"array", "null"}, "items": map[string]any{"type": "string"}},
				},
			},
		}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("request =\n%s\nwant\n%s", providertest.JS(got), providertest.JS(want))
	}

	// Parts chat completions cannot carry are refused, not dropped.
	req.Contents = append(req.Contents, &genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{{InlineData: &genai.Blob{MIMEType: "image/png", Data: []byte{1}}}}})
	if _, err := chatParams("m", "", req); err == nil || !strings.Contains(err.Error(), "inline data") {
		t.Errorf("inline data: err = %v", err)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	for _, o := range []Options{
		{},
		{Model: "m", BaseURL: "localhost:11434"},
		{Model: "m", BaseURL: "ftp://x/"},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) = nil error", o)
		}
	}
}
