package worker

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/models"
)

// chatServer is an OpenAI-compatible server answering every
// POST /v1/chat/completions with status and body, recording the model
// and the reasoning effort each request asked for.
type chatServer struct {
	URL     string
	mu      sync.Mutex
	models  []string
	efforts []string
}

func newChatServer(t *testing.T, status int, body string) *chatServer {
	s := &chatServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model  string `json:"model"`
			Effort string `json:"reasoning_effort"`
		}
		if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil {
			t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
		}
		s.mu.Lock()
		s.models = append(s.models, req.Model)
		s.efforts = append(s.efforts, req.Effort)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Requests returns the model names asked for so far.
func (s *chatServer) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.models...)
}

// Efforts returns the reasoning efforts asked for so far ("" none).
func (s *chatServer) Efforts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.efforts...)
}

// A real turn on an OpenAI-compatible model whose server answers 503 to
// every attempt: after its retries the call goes to the fallback, which
// answers; the turn completes, the response is charged at the fallback's
// price under the fallback's name, and the fallback is counted and
// evented.
func TestFallbackModelAnswersWhenThePrimaryIsDown(t *testing.T) {
	t.Parallel()
	down := newChatServer(t, 503, `{"error": {"message": "The server is overloaded.", "type": "server_error", "param": null, "code": null}}`)
	cheap := newChatServer(t, 200, `{
  "id": "chatcmpl-fb1", "object": "chat.completion", "created": 1741570284, "model": "cheap-model-1",
  "choices": [{"index": 0, "message": {"role": "assistant", "content": "noted: disk full on db-1", "refusal": null, "annotations": []},
    "logprobs": null, "finish_reason": "stop"}],
  "usage": {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100,
    "prompt_tokens_details": {"cached_tokens": 0}, "completion_tokens_details": {"reasoning_tokens": 0}}
}`)
	r := startReal(t, pairConfig(t, t.TempDir(), `{listen: "127.0.0.1:0"}`, down.URL, ", retry: {max: 2, base: 1ms, max_wait: 1ms}, fallback: cheap", cheap.URL))

	r.publish("agents.triage.inbox", "disk full on db-1")
	fb := r.waitEvent(models.EventFallback)
	if fb.Agent != "triage" || fb.Data["model"] != "main-model-1" || fb.Data["fallback"] != "cheap-model-1" {
		t.Errorf("fallback event %+v", fb)
	}
	charged := r.waitEvent(guard.EventCharged)
	const cost = (1000*1 + 100*4) / 1e6 // at the fallback's price, not the primary's $0.014
	if charged.Data["model"] != "cheap-model-1" || math.Abs(charged.Data["cost_usd"].(float64)-cost) > 1e-12 || charged.Data["priced"] != true {
		t.Errorf("charge %v, want cheap-model-1 at $%v", charged.Data, cost)
	}
	done := r.waitEvent(events.TurnCompleted)
	if n := len(down.Requests()); n != 3 {
		t.Errorf("primary got %d requests, want 3 (1 + 2 retries)", n)
	}
	if got := cheap.Requests(); len(got) != 1 || got[0] != "cheap-model-1" {
		t.Errorf("fallback got requests for %q, want one for cheap-model-1", got)
	}
	if done.Data["outcome"] != nil && done.Data["outcome"] != "completed" {
		t.Errorf("turn %v", done.Data)
	}

	with := func(kv ...string) map[string]string {
		m := map[string]string{"agent": "triage"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	wait.Within(t, deadline, "metrics caught up", func() bool {
		return value(t, scrape(t, r), "agent_worker_turns_total", with("outcome", "completed")) == 1
	})
	f := scrape(t, r)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"agent_worker_model_fallbacks_total", with("model", "main-model-1", "fallback", "cheap-model-1"), 1},
		{"agent_worker_model_requests_total", with("model", "main-model-1", "outcome", "retry"), 2},
		{"agent_worker_model_requests_total", with("model", "main-model-1", "outcome", "ok"), 0},
		{"agent_worker_model_requests_total", with("model", "cheap-model-1", "outcome", "ok"), 1},
		{"agent_worker_model_tokens_total", with("model", "cheap-model-1", "type", "input"), 1000},
		{"agent_worker_model_tokens_total", with("model", "main-model-1", "type", "input"), 0},
		{"agent_worker_model_cost_usd_total", with("model", "cheap-model-1", "priced", "true"), cost},
		{"agent_worker_model_cost_usd_total", with("model", "main-model-1", "priced", "true"), 0},
	} {
		if got := value(t, f, c.name, c.labels); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}
