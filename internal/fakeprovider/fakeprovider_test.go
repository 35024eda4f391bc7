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

// While Fail is set every request is refused with its status, costs
// nothing and counts as no step; after Fail(0) answers are billed again.
func TestFailRefusesUntilCleared(t *testing.T) {
	t.Parallel()
	p := &Provider{Subject: "ops.reports.db", Text: "hi"}
	ask := func(roles ...string) *httptest.ResponseRecorder {
		var msgs []map[string]string
		for _, r := range roles {
			msgs = append(msgs, map[string]string{"role": r})
		}
		body, _ := json.Marshal(map[string]any{"messages": msgs})
		w := httptest.NewRecorder()
		p.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(string(body))))
		return w
	}
	for _, status := range []int{http.StatusTooManyRequests, http.StatusInternalServerError} {
		p.Fail(status)
		w := ask("system", "user")
		var reply struct {
			Error struct{ Type string } `json:"error"`
		}
		if w.Code != status || json.Unmarshal(w.Body.Bytes(), &reply) != nil || reply.Error.Type == "" {
			t.Fatalf("Fail(%d): answered %d %s", status, w.Code, w.Body)
		}
		if got := w.Header().Get("Retry-After"); (status == http.StatusTooManyRequests) != (got == "1") {
			t.Errorf("Fail(%d): Retry-After %q", status, got)
		}
	}
	p.Fail(0)
	if w := ask("system", "user"); w.Code != http.StatusOK {
		t.Fatalf("after Fail(0): %d %s", w.Code, w.Body)
	}
	ask("system", "user", "assistant", "tool")
	if first, second, _ := p.Counts(); first != 1 || second != 1 {
		t.Fatalf("steps counted %d and %d, want 1 and 1: refused requests are no steps", first, second)
	}
	if first, second, refused := p.Answered(); first != 1 || second != 1 || refused != 2 {
		t.Fatalf("answered %d, %d, refused %d; want 1, 1, 2", first, second, refused)
	}
}
