package openai

import (
	"strings"
	"testing"

	"github.com/agent-worker/agent-worker/models/internal/providertest"
	"github.com/agent-worker/agent-worker/models/retry"
)

// reasoning_effort is Chat Completions' parameter for a reasoning model's
// effort (POST /v1/chat/completions, "reasoning_effort": "low" | "medium"
// | "high"); the reasoning tokens come back in
// usage.completion_tokens_details.reasoning_tokens.
func TestReasoningEffortInRequest(t *testing.T) {
	t.Parallel()
	for _, level := range []string{"low", "medium", "high", ""} {
		t.Run("level="+level, func(t *testing.T) {
			t.Parallel()
			f := providertest.NewServer(t, providertest.Reply(200, textReply))
			m, err := New(Options{Model: "o4-mini", BaseURL: f.URL + "/v1", Reasoning: level, Retry: retry.Policy{}})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := providertest.Generate(t.Context(), m, providertest.UserRequest("Is 2^61-1 prime?"))
			if err != nil {
				t.Fatal(err)
			}
			if resp.UsageMetadata.ThoughtsTokenCount != 100 {
				t.Errorf("thoughts tokens = %d, want the 100 reasoning_tokens", resp.UsageMetadata.ThoughtsTokenCount)
			}
			body := f.Requests()[0].Body
			got, present := body["reasoning_effort"]
			switch {
			case level == "" && present:
				t.Errorf("reasoning_effort = %v sent without a reasoning level", got)
			case level != "" && got != level:
				t.Errorf("reasoning_effort = %v (present %v), want %q\nbody: %s", got, present, level, providertest.JS(body))
			}
			if _, ok := body["reasoning"]; ok {
				t.Errorf("body has a Responses API \"reasoning\" object; chat completions takes reasoning_effort")
			}
		})
	}
}

func TestUnknownReasoningLevelRefused(t *testing.T) {
	t.Parallel()
	_, err := New(Options{Model: "o4-mini", Reasoning: "extreme"})
	if err == nil || !strings.Contains(err.Error(), `unknown reasoning level "extreme"`) {
		t.Fatalf("New with reasoning extreme = %v", err)
	}
}
