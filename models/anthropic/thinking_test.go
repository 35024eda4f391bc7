package anthropic

import (
	"reflect"
	"strings"
	"testing"

	"google.golang.org/adk/model"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/models/internal/providertest"
	"github.com/agent-worker/agent-worker/models/retry"
)

// The replies below follow the extended-thinking response format of the
// Messages API: "thinking" blocks {thinking, signature} and
// "redacted_thinking" blocks {data} before the text and tool_use blocks;
// thinking tokens are billed in output_tokens.

const thinkingToolUseReply = `{
  "id": "msg_01Th1nk1ngT00lUse",
  "type": "message",
  "role": "assistant",
  "model": "claude-sonnet-4-5-20250929",
  "content": [
    {"type": "thinking", "thinking": "The user wants Paris weather; I should call get_weather.", "signature": "WaUjzkypQ2mUEVM36O2TxuC06KN8xyfbJwyem2dw3URve/op91XWHOEBLLqIOMfFG/UvLEczmEsUjavL"},
    {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"},
    {"type": "tool_use", "id": "toolu_01Th1nk", "name": "get_weather", "input": {"city": "Paris"}}
  ],
  "stop_reason": "tool_use",
  "stop_sequence": null,
  "usage": {"input_tokens": 500, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 320}
}`

const thinkingTextReply = `{
  "id": "msg_01Th1nk1ngText",
  "type": "message",
  "role": "assistant",
  "model": "claude-sonnet-4-5-20250929",
  "content": [
    {"type": "thinking", "thinking": "18 and sunny: say so.", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"},
    {"type": "text", "text": "It is 18°C and sunny in Paris."}
  ],
  "stop_reason": "end_turn",
  "stop_sequence": null,
  "usage": {"input_tokens": 900, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 140}
}`

func thinkingModel(t *testing.T, f *providertest.Server, level string, maxTokens int) *Model {
	t.Helper()
	m, err := New(Options{Model: "claude-sonnet-4-5", BaseURL: f.URL, APIKey: testKey, Reasoning: level, MaxTokens: maxTokens, Retry: retry.Policy{}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// With reasoning, every request of a tool turn carries thinking with the
// level's budget, max_tokens leaves the answer its own room, and the
// thinking blocks come back unchanged in the assistant message of the
// tool-use loop, as the API requires; the thinking text never becomes the
// agent's answer.
func TestThinkingThroughATurn(t *testing.T) {
	t.Parallel()
	f := providertest.NewServer(t, providertest.Reply(200, thinkingToolUseReply), providertest.Reply(200, thinkingTextReply))
	m := thinkingModel(t, f, "medium", 2000)

	events, cities := providertest.WeatherTurn(t, "anthropic-thinking", m)
	var shape []string
	for _, ev := range events {
		shape = append(shape, providertest.Describe(ev))
	}
	want := []string{"call get_weather", "response get_weather", "final It is 18°C and sunny in Paris."}
	if !reflect.DeepEqual(shape, want) || !reflect.DeepEqual(cities, []string{"Paris"}) {
		t.Fatalf("events = %q (cities %q)\nwant     %q", shape, cities, want)
	}
	if u := events[2].UsageMetadata; u == nil || u.CandidatesTokenCount != 140 {
		t.Errorf("final usage = %+v, want the 140 output tokens, thinking included", u)
	}

	reqs := f.Requests()
	if len(reqs) != 2 {
		t.Fatalf("server got %d requests, want 2", len(reqs))
	}
	for i, rq := range reqs {
		wantThinking := map[string]any{"type": "enabled", "budget_tokens": float64(4096)}
		if !reflect.DeepEqual(rq.Body["thinking"], wantThinking) {
			t.Errorf("request %d: thinking = %s, want %s", i, providertest.JS(rq.Body["thinking"]), providertest.JS(wantThinking))
		}
		if rq.Body["max_tokens"] != float64(2000+4096) {
			t.Errorf("request %d: max_tokens = %v, want 2000 for the answer + 4096 thinking budget", i, rq.Body["max_tokens"])
		}
	}
	msgs, _ := reqs[1].Body["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("second request has %d messages, want 3: %s", len(msgs), providertest.JS(msgs))
	}
	wantAssistant := map[string]any{"role": "assistant", "content": []any{
		map[string]any{"type": "thinking", "thinking": "The user wants Paris weather; I should call get_weather.",
			"signature": "WaUjzkypQ2mUEVM36O2TxuC06KN8xyfbJwyem2dw3URve/op91XWHOEBLLqIOMfFG/UvLEczmEsUjavL"},
		map[string]any{"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"},
		map[string]any{"type": "tool_use", "id": "toolu_01Th1nk", "name": "get_weather", "input": map[string]any{"city": "Paris"}},
	}}
	if !reflect.DeepEqual(msgs[1], wantAssistant) {
		t.Errorf("assistant message sent back =\n%s\nwant\n%s", providertest.JS(msgs[1]), providertest.JS(wantAssistant))
	}
}

func TestThinkingBudgets(t *testing.T) {
	t.Parallel()
	for level, budget := range map[string]float64{"low": 1024, "medium": 4096, "high": 16384} {
		t.Run(level, func(t *testing.T) {
			t.Parallel()
			f := providertest.NewServer(t, providertest.Reply(200, thinkingTextReply))
			m := thinkingModel(t, f, level, 0)
			resp, err := providertest.Generate(t.Context(), m, providertest.UserRequest("Is 2^61-1 prime?"))
			if err != nil {
				t.Fatal(err)
			}
			body := f.Requests()[0].Body
			th, _ := body["thinking"].(map[string]any)
			if th["type"] != "enabled" || th["budget_tokens"] != budget || body["max_tokens"] != float64(DefaultMaxTokens)+budget {
				t.Errorf("thinking %v max_tokens %v, want enabled with %v and max_tokens %v", th, body["max_tokens"], budget, float64(DefaultMaxTokens)+budget)
			}
			// The thought is a thought part; only the text is the answer.
			parts := resp.Content.Parts
			if len(parts) != 2 || !parts[0].Thought || parts[0].Text != "18 and sunny: say so." || parts[1].Thought || parts[1].Text != "It is 18°C and sunny in Paris." {
				t.Errorf("parts = %s", providertest.JS(parts))
			}
		})
	}
	if _, err := New(Options{Model: "claude-sonnet-4-5", APIKey: testKey, Reasoning: "max"}); err == nil || !strings.Contains(err.Error(), `unknown reasoning level "max"`) {
		t.Errorf("New with reasoning max = %v", err)
	}
}

// Requests the API would refuse with thinking go without it: a forced
// tool, and a tool-use loop whose assistant message has no thinking
// block (begun by a fallback model, or before reasoning was set). Without
// a budget nothing about thinking is sent, thought parts included.
func TestThinkingLeftOut(t *testing.T) {
	t.Parallel()
	call := &genai.Part{FunctionCall: &genai.FunctionCall{ID: "toolu_1", Name: "get_weather", Args: map[string]any{"city": "Paris"}}}
	result := &genai.Part{FunctionResponse: &genai.FunctionResponse{ID: "toolu_1", Name: "get_weather", Response: map[string]any{"temp_c": 18}}}
	thought := &genai.Part{Text: "call the tool", Thought: true, ThoughtSignature: []byte("sig-1")}
	user := genai.NewContentFromText("Weather in Paris?", genai.RoleUser)
	tools := []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{Name: "get_weather"}}}}
	tests := []struct {
		name     string
		budget   int64
		req      *model.LLMRequest
		thinking bool
		blocks   int // blocks of the assistant message, when there is one
	}{
		{"plain question", 1024, &model.LLMRequest{Contents: []*genai.Content{user}}, true, 0},
		{"loop with its thinking", 1024, &model.LLMRequest{Contents: []*genai.Content{user,
			{Role: genai.RoleModel, Parts: []*genai.Part{thought, call}}, {Role: genai.RoleUser, Parts: []*genai.Part{result}}}}, true, 2},
		{"loop begun without thinking", 1024, &model.LLMRequest{Contents: []*genai.Content{user,
			{Role: genai.RoleModel, Parts: []*genai.Part{call}}, {Role: genai.RoleUser, Parts: []*genai.Part{result}}}}, false, 1},
		{"forced tool", 1024, &model.LLMRequest{Contents: []*genai.Content{user}, Config: &genai.GenerateContentConfig{Tools: tools,
			ToolConfig: &genai.ToolConfig{FunctionCallingConfig: &genai.FunctionCallingConfig{Mode: genai.FunctionCallingConfigModeAny}}}}, false, 0},
		{"no budget", 0, &model.LLMRequest{Contents: []*genai.Content{user,
			{Role: genai.RoleModel, Parts: []*genai.Part{thought, call}}, {Role: genai.RoleUser, Parts: []*genai.Part{result}}}}, false, 1},
	}
	for _, tt := range tests {
		p, err := messageParams("m", 4096, tt.budget, tt.req)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		on := p.Thinking.OfEnabled != nil
		if on != tt.thinking {
			t.Errorf("%s: thinking sent %v, want %v", tt.name, on, tt.thinking)
		}
		if wantMax := 4096 + map[bool]int64{true: tt.budget}[tt.thinking]; p.MaxTokens != wantMax {
			t.Errorf("%s: max_tokens %d, want %d", tt.name, p.MaxTokens, wantMax)
		}
		if tt.blocks > 0 {
			if got := len(p.Messages[1].OfAssistant.Content); got != tt.blocks {
				t.Errorf("%s: assistant message has %d blocks, want %d", tt.name, got, tt.blocks)
			}
		}
	}
}
