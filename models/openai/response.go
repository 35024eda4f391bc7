package openai

import (
	"encoding/json"
	"fmt"

	oai "github.com/openai/openai-go/v3"
	"google.golang.org/adk/model"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/internal/textclip"
	"github.com/agent-worker/agent-worker/models/internal/wire"
)

// llmResponse maps the first choice of a chat completion onto an ADK
// response: the message content (or, failing that, its refusal) becomes a
// text part, each function tool call a FunctionCall part whose Args are the
// call's JSON arguments decoded. Arguments that are not a JSON object are an
// error (the turn fails and says which tool), never a panic. A tool call
// without an ID, which some OpenAI-compatible servers send, gets a fresh
// "call_" ID so that its result can be paired with it.
//
// Usage: PromptTokenCount is prompt_tokens (cached tokens included),
// CachedContentTokenCount is prompt_tokens_details.cached_tokens,
// ThoughtsTokenCount is completion_tokens_details.reasoning_tokens and
// CandidatesTokenCount the rest of completion_tokens, so that candidates +
// thoughts = completion_tokens, as Gemini counts them.
func llmResponse(c *oai.ChatCompletion) (*model.LLMResponse, error) {
	resp := &model.LLMResponse{
		ModelVersion:  c.Model,
		UsageMetadata: usage(c.Usage),
		TurnComplete:  true,
	}
	if len(c.Choices) == 0 {
		resp.ErrorCode = "NO_CHOICES"
		resp.ErrorMessage = "the response has no choices"
		return resp, nil
	}
	choice := c.Choices[0]
	msg := choice.Message
	var parts []*genai.Part
	switch {
	case msg.Content != "":
		parts = append(parts, genai.NewPartFromText(msg.Content))
	case msg.Refusal != "":
		parts = append(parts, genai.NewPartFromText(msg.Refusal))
	}
	for i, tc := range msg.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			return nil, fmt.Errorf("tool_calls[%d]: unsupported tool call type %q", i, tc.Type)
		}
		args := map[string]any{}
		if raw := tc.Function.Arguments; raw != "" {
			if err := json.Unmarshal([]byte(raw), &args); err != nil {
				return nil, fmt.Errorf("tool_calls[%d] %q: arguments are not a JSON object: %w (arguments: %s)", i, tc.Function.Name, err, textclip.Bytes(raw, 200, "…"))
			}
			if args == nil { // "null"
				args = map[string]any{}
			}
		}
		id := tc.ID
		if id == "" {
			id = wire.CallID("call_")
		}
		parts = append(parts, &genai.Part{FunctionCall: &genai.FunctionCall{ID: id, Name: tc.Function.Name, Args: args}})
	}
	resp.Content = &genai.Content{Role: genai.RoleModel, Parts: parts}
	resp.FinishReason = finishReason(choice.FinishReason, msg.Refusal != "" && msg.Content == "")
	if len(parts) == 0 && resp.FinishReason != genai.FinishReasonStop {
		// Mirror ADK's Gemini conversion: an empty answer that did not
		// simply stop is an error the turn can see.
		resp.ErrorCode = string(resp.FinishReason)
		resp.ErrorMessage = "the model returned no content (finish_reason " + choice.FinishReason + ")"
	}
	return resp, nil
}

func usage(u oai.CompletionUsage) *genai.GenerateContentResponseUsageMetadata {
	reasoning := min(u.CompletionTokensDetails.ReasoningTokens, u.CompletionTokens)
	total := u.TotalTokens
	if total == 0 {
		total = u.PromptTokens + u.CompletionTokens
	}
	return &genai.GenerateContentResponseUsageMetadata{
		PromptTokenCount:        int32(u.PromptTokens),
		CachedContentTokenCount: int32(u.PromptTokensDetails.CachedTokens),
		CandidatesTokenCount:    int32(u.CompletionTokens - reasoning),
		ThoughtsTokenCount:      int32(reasoning),
		TotalTokenCount:         int32(total),
	}
}

// finishReason maps OpenAI's finish_reason. "tool_calls" is STOP, as Gemini
// reports a turn that ends in function calls.
func finishReason(r string, refused bool) genai.FinishReason {
	switch r {
	case "stop", "tool_calls", "function_call":
		if refused {
			return genai.FinishReasonSafety
		}
		return genai.FinishReasonStop
	case "length":
		return genai.FinishReasonMaxTokens
	case "content_filter":
		return genai.FinishReasonSafety
	case "":
		return genai.FinishReasonUnspecified
	default:
		return genai.FinishReasonOther
	}
}
