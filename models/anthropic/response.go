package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"google.golang.org/adk/model"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/models/internal/wire"
)

// CacheWriteKey is the LLMResponse.CustomMetadata key under which a response
// reports cache_creation_input_tokens, as an int (guard.UsageOf reads it).
const CacheWriteKey = "cache_write_tokens"

// llmResponse maps a Messages API answer onto an ADK response: "text"
// blocks become text parts, "tool_use" blocks FunctionCall parts (ID, name,
// input as Args), "thinking" blocks thought parts (text, and the signature
// as ThoughtSignature), "redacted_thinking" blocks thought parts without
// text (the data as ThoughtSignature); other block types are left out. An input that is not a JSON object is an error naming the tool,
// never a panic.
//
// Usage: PromptTokenCount is every prompt token, input_tokens +
// cache_read_input_tokens + cache_creation_input_tokens (Anthropic's
// input_tokens counts only the uncached rest); CachedContentTokenCount is
// cache_read_input_tokens; CandidatesTokenCount is output_tokens; and
// CustomMetadata[CacheWriteKey] is cache_creation_input_tokens as an int.
func llmResponse(msg *sdk.Message) (*model.LLMResponse, error) {
	var parts []*genai.Part
	for i, b := range msg.Content {
		switch b.Type {
		case "text":
			if b.Text != "" {
				parts = append(parts, genai.NewPartFromText(b.Text))
			}
		case "thinking":
			if b.Thinking != "" {
				parts = append(parts, &genai.Part{Text: b.Thinking, Thought: true, ThoughtSignature: []byte(b.Signature)})
			}
		case "redacted_thinking":
			// Encrypted reasoning: no text, only the data the API wants
			// back within a tool-use loop (messageParams sends it).
			if b.Data != "" {
				parts = append(parts, &genai.Part{Thought: true, ThoughtSignature: []byte(b.Data)})
			}
		case "tool_use":
			args := map[string]any{}
			if raw := bytes.TrimSpace(b.Input); len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
				if err := json.Unmarshal(raw, &args); err != nil {
					return nil, fmt.Errorf("content[%d] tool_use %q: input is not a JSON object: %w", i, b.Name, err)
				}
			}
			id := b.ID
			if id == "" {
				id = wire.CallID("toolu_")
			}
			parts = append(parts, &genai.Part{FunctionCall: &genai.FunctionCall{ID: id, Name: b.Name, Args: args}})
		}
	}
	u := msg.Usage
	resp := &model.LLMResponse{
		Content:      &genai.Content{Role: genai.RoleModel, Parts: parts},
		ModelVersion: string(msg.Model),
		FinishReason: finishReason(msg.StopReason),
		TurnComplete: true,
		UsageMetadata: &genai.GenerateContentResponseUsageMetadata{
			PromptTokenCount:        int32(u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens),
			CachedContentTokenCount: int32(u.CacheReadInputTokens),
			CandidatesTokenCount:    int32(u.OutputTokens),
			TotalTokenCount:         int32(u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens + u.OutputTokens),
		},
		CustomMetadata: map[string]any{CacheWriteKey: int(u.CacheCreationInputTokens)},
	}
	if len(parts) == 0 && resp.FinishReason != genai.FinishReasonStop {
		resp.ErrorCode = string(resp.FinishReason)
		resp.ErrorMessage = "the model returned no content (stop_reason " + string(msg.StopReason) + ")"
	}
	return resp, nil
}

// finishReason maps stop_reason. A turn that ends in tool use is STOP, as
// Gemini reports it.
func finishReason(r sdk.StopReason) genai.FinishReason {
	switch r {
	case sdk.StopReasonEndTurn, sdk.StopReasonStopSequence, sdk.StopReasonToolUse, sdk.StopReasonPauseTurn:
		return genai.FinishReasonStop
	case sdk.StopReasonMaxTokens, sdk.StopReasonModelContextWindowExceeded:
		return genai.FinishReasonMaxTokens
	case sdk.StopReasonRefusal:
		return genai.FinishReasonSafety
	case "":
		return genai.FinishReasonUnspecified
	default:
		return genai.FinishReasonOther
	}
}
