package gemini

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/adk/model"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/models/internal/providertest"
	"github.com/agent-worker/agent-worker/models/retry"
)

// thinkingBudget is where the Gemini API takes a thinking budget:
// generateContent's generationConfig.thinkingConfig.thinkingBudget.
func thinkingBudget(body map[string]any) (any, bool) {
	gc, _ := body["generationConfig"].(map[string]any)
	tc, _ := gc["thinkingConfig"].(map[string]any)
	v, ok := tc["thinkingBudget"]
	return v, ok
}

func TestThinkingBudgetInRequest(t *testing.T) {
	t.Parallel()
	for level, want := range map[string]float64{"low": 1024, "medium": 4096, "high": 16384, "": 0} {
		t.Run("level="+level, func(t *testing.T) {
			t.Parallel()
			f := providertest.NewServer(t, providertest.Reply(200, textReply))
			m, err := New(t.Context(), Options{Model: "gemini-2.5-flash", APIKey: testKey, BaseURL: f.URL, Reasoning: level, Retry: retry.Policy{}})
			if err != nil {
				t.Fatal(err)
			}
			req := providertest.UserRequest("Is 2^61-1 prime?")
			req.Config = &genai.GenerateContentConfig{Temperature: genai.Ptr[float32](0.2)}
			resp, err := providertest.Generate(t.Context(), m, req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.UsageMetadata.ThoughtsTokenCount != 100 {
				t.Errorf("thoughts tokens = %d, want 100", resp.UsageMetadata.ThoughtsTokenCount)
			}
			rq := f.Requests()[0]
			if rq.Path != generatePath {
				t.Errorf("path %s, want %s", rq.Path, generatePath)
			}
			got, present := thinkingBudget(rq.Body)
			switch {
			case level == "" && present:
				t.Errorf("thinkingBudget %v sent without a reasoning level", got)
			case level != "" && got != want:
				t.Errorf("thinkingBudget = %v, want %v\nbody: %s", got, want, providertest.JS(rq.Body))
			}
			if gc, _ := rq.Body["generationConfig"].(map[string]any); gc["temperature"] != 0.2 {
				t.Errorf("generationConfig lost the request's temperature: %s", providertest.JS(gc))
			}
			if req.Config.ThinkingConfig != nil {
				t.Errorf("the caller's request was changed: %+v", req.Config.ThinkingConfig)
			}
		})
	}
}

// A thinking config the request brings (an ADK planner's) wins over the
// model's level; streamed requests get the budget too.
func TestThinkingBudgetOfTheRequestWins(t *testing.T) {
	t.Parallel()
	f := providertest.NewServer(t, providertest.Reply(200, textReply))
	m, err := New(t.Context(), Options{Model: "gemini-2.5-flash", APIKey: testKey, BaseURL: f.URL, Reasoning: "high"})
	if err != nil {
		t.Fatal(err)
	}
	req := &model.LLMRequest{Contents: providertest.UserRequest("hi").Contents,
		Config: &genai.GenerateContentConfig{ThinkingConfig: &genai.ThinkingConfig{ThinkingBudget: genai.Ptr[int32](0)}}}
	if _, err := providertest.Generate(t.Context(), m, req); err != nil {
		t.Fatal(err)
	}
	if got, _ := thinkingBudget(f.Requests()[0].Body); got != float64(0) {
		t.Errorf("thinkingBudget = %v, want the request's own 0", got)
	}
	if _, err := New(t.Context(), Options{Model: "gemini-2.5-flash", APIKey: testKey, Reasoning: "Low"}); err == nil || !strings.Contains(err.Error(), `unknown reasoning level "Low"`) {
		t.Errorf("New with reasoning Low = %v", err)
	}

	s := providertest.NewServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: "+strings.ReplaceAll(textReply, "\n", "")+"\n\n")
	})
	sm, err := New(t.Context(), Options{Model: "gemini-2.5-flash", APIKey: testKey, BaseURL: s.URL, Reasoning: "low"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, err := range sm.GenerateContent(t.Context(), providertest.UserRequest("hi"), true) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if got, _ := thinkingBudget(s.Requests()[0].Body); n == 0 || got != float64(1024) {
		t.Errorf("streamed: %d responses, thinkingBudget %v, want 1024", n, got)
	}
}
