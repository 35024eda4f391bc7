package scripted

import (
	"math"

	"google.golang.org/adk/model"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/config"
)

// stepResponse renders a text and/or call step as a final model response. A
// step with neither still gets an (empty) text part, so consumers never see
// a response without parts.
func stepResponse(s config.ScriptStep, newID func() string) *model.LLMResponse {
	var parts []*genai.Part
	if s.Text != "" || s.Call == nil {
		parts = append(parts, genai.NewPartFromText(s.Text))
	}
	if s.Call != nil {
		parts = append(parts, &genai.Part{FunctionCall: &genai.FunctionCall{
			ID:   newID(),
			Name: s.Call.Name,
			// A copy: ADK and tools may mutate the arguments, and a looping
			// script hands out the same step again.
			Args: cloneMap(s.Call.Args),
		}})
	}
	return response(parts, s.Usage)
}

func response(parts []*genai.Part, u config.Usage) *model.LLMResponse {
	return &model.LLMResponse{
		Content: &genai.Content{Role: genai.RoleModel, Parts: parts},
		UsageMetadata: &genai.GenerateContentResponseUsageMetadata{
			PromptTokenCount:        tokens(u.Input),
			CachedContentTokenCount: tokens(u.CachedInput),
			CandidatesTokenCount:    tokens(u.Output),
			TotalTokenCount:         tokens(u.Input + u.Output),
		},
		FinishReason: genai.FinishReasonStop,
	}
}

// tokens saturates instead of wrapping, so a silly script reports a huge
// count rather than a negative one.
func tokens(n int) int32 {
	switch {
	case n > math.MaxInt32:
		return math.MaxInt32
	case n < 0:
		return 0
	}
	return int32(n)
}

// cloneMap deep-copies the JSON-shaped values a script holds (maps and
// slices); anything else is copied by value.
func cloneMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return cloneMap(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = cloneValue(e)
		}
		return out
	default:
		return v
	}
}
