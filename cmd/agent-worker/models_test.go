package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestModelsCheck runs `agent-worker models check` against a fake
// OpenAI-compatible server (and a scripted model), as a user would after
// adding a key.
func TestModelsCheck(t *testing.T) { // not parallel: it sets environment variables
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer sk-test-key-123" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id": "chatcmpl-1", "object": "chat.completion", "created": 1764400000, "model": "gpt-4.1-mini",
			"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
			"usage": {"prompt_tokens": 12, "completion_tokens": 1, "total_tokens": 13}}`))
	}))
	t.Cleanup(srv.Close)
	t.Setenv("CHECK_BAD_KEY", "sk-wrong-key-456")
	keyFile := writeFile(t, "sk-test-key-123\n")
	p := writeFile(t, `models:
  good: {provider: openai, model: gpt-4.1-mini, base_url: "`+srv.URL+`/v1", api_key_file: "`+keyFile+`", retry: {max: 0}}
  bad: {provider: openai, model: gpt-4.1-mini, base_url: "`+srv.URL+`/v1", api_key_env: CHECK_BAD_KEY, retry: {max: 0}}
  canned: {provider: scripted, script: [{text: "ok", usage: {input: 3, output: 1}}]}
agents: [{name: a, model: canned}]
`)
	var out, errb syncBuffer
	code := execute(context.Background(), []string{"models", "check", "--config", p}, &out, &errb)
	if code != exitFailed {
		t.Fatalf("exit %d with a failing model; stderr %s", code, errb.String())
	}
	o := out.String()
	for _, want := range []string{"good    openai", "12/1", "ok: ok", "canned  scripted", "3/1", "Incorrect API key provided"} {
		if !strings.Contains(o, want) {
			t.Errorf("output lacks %q:\n%s", want, o)
		}
	}
	if strings.Contains(o+errb.String(), "sk-wrong-key-456") || strings.Contains(o+errb.String(), "sk-test-key-123") {
		t.Fatalf("an API key was printed:\n%s%s", o, errb.String())
	}
	if !strings.Contains(errb.String(), "1 of 3 model(s) failed") {
		t.Fatalf("stderr: %s", errb.String())
	}

	var one syncBuffer
	if code := execute(context.Background(), []string{"models", "check", "good", "--config", p}, &one, &errb); code != exitOK {
		t.Fatalf("checking the good model alone: exit %d", code)
	}
}
