package fakeprovider

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A request is a second step only when a tool result follows its newest
// user message; earlier turns' tool results in the history do not count.
func TestStepsAreToldByWhatFollowsTheNewestUserMessage(t *testing.T) {
	t.Parallel()
	p := &Provider{Subject: "ops.reports.db", Text: `say "hi"`}
	for _, c := range []struct {
		roles      string
		wantFinish string
	}{
		{"system,user", "tool_calls"},
		{"system,user,assistant,tool", "stop"},
		{"system,user,assistant,tool,assistant,user", "tool_calls"}, // the next turn
	} {
		var msgs []map[string]string
		for _, r := range strings.Split(c.roles, ",") {
			msgs = append(msgs, map[string]string{"role": r})
		}
		body, _ := json.Marshal(map[string]any{"messages": msgs})
		w := httptest.NewRecorder()
		p.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(string(body))))
		var reply struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
				Message      struct {
					ToolCalls []struct {
						Function struct{ Arguments string } `json:"function"`
					} `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &reply); err != nil || len(reply.Choices) != 1 {
			t.Fatalf("%s: reply %s: %v", c.roles, w.Body, err)
		}
		ch := reply.Choices[0]
		if ch.FinishReason != c.wantFinish {
			t.Errorf("%s: finish %q, want %q", c.roles, ch.FinishReason, c.wantFinish)
		}
		if c.wantFinish == "tool_calls" {
			var args map[string]string
			if err := json.Unmarshal([]byte(ch.Message.ToolCalls[0].Function.Arguments), &args); err != nil || args["text"] != `say "hi"` || args["subject"] != "ops.reports.db" {
				t.Errorf("%s: arguments %q %v", c.roles, ch.Message.ToolCalls[0].Function.Arguments, err)
			}
		}
	}
	if first, second, _ := p.Counts(); first != 2 || second != 1 {
		t.Fatalf("counted %d first and %d second steps, want 2 and 1", first, second)
	}
}
