// Package fakeprovider is a model provider for the tests that run the
// worker as a process: an HTTP handler speaking OpenAI's Chat Completions
// wire format (POST /v1/chat/completions, object "chat.completion", as in
// the API reference) whose every turn is two steps. It is stateless, as a
// real provider is: a request whose newest user message is followed by a
// tool result is a turn's second step, answered with a text that ends the
// turn; any other request is a first step, answered with a call of the
// publish tool. It counts the requests of each step and the answers
// written, and can be told to refuse every request for a while (Fail), as
// a provider that rate-limits or is down. It has no use outside tests and
// the chaos suite.
package fakeprovider

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Usage of the two steps' responses, for spend checks.
const (
	FirstIn, FirstOut   = 100, 20
	SecondIn, SecondOut = 200, 10
)

// Provider is the handler. Set its fields before serving.
type Provider struct {
	// Subject and Text are the publish call's arguments.
	Subject, Text string
	// SecondDelay delays every second-step answer.
	SecondDelay time.Duration
	// Hold, when set, holds the first second-step request until it is
	// closed (or the client goes); Held is closed when that request
	// arrives.
	Hold, Held chan struct{}

	mu                      sync.Mutex
	first, second, inSecond int
	// Answers written in full by step, requests refused, and the status
	// refusing now (0: none).
	answeredFirst, answeredSecond, refused int
	failing                                int
}

// Fail makes every request from now on answered with status (429 with
// Retry-After: 1, or a 5xx) and an error body in OpenAI's format, until
// Fail(0). Refused requests count in Answered's refused only, not as
// steps: a refused request costs nothing.
func (p *Provider) Fail(status int) {
	p.mu.Lock()
	p.failing = status
	p.mu.Unlock()
}

// Answered returns how many first- and second-step answers were written
// whole to their clients (what a real provider would bill), and how many
// requests Fail refused. A request whose client went away first (a worker
// killed while it waited) is counted by Counts but not here.
func (p *Provider) Answered() (first, second, refused int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.answeredFirst, p.answeredSecond, p.refused
}

// Counts returns the first- and second-step requests so far and how many
// second-step requests are being answered now.
func (p *Provider) Counts() (first, second, inSecond int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.first, p.second, p.inSecond
}

func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	second, err := secondStep(r)
	if err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error": {"message": "unreadable request", "type": "invalid_request_error", "param": null, "code": null}}`)
		return
	}
	reply, hold, status := p.begin(second)
	if status != 0 {
		refuse(w, status)
		return
	}
	if second {
		defer p.endSecond()
		if !p.waitSecond(r.Context(), hold) {
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if _, err := io.WriteString(w, reply); err != nil || r.Context().Err() != nil {
		return
	}
	p.countAnswer(second)
}

// secondStep reads the request's messages and reports whether it is a
// turn's second step. The history before the newest user message holds
// earlier turns' tool results: only one after it makes this the second
// step. That is all the provider needs to know, being stateless.
func secondStep(r *http.Request) (bool, error) {
	body, err := io.ReadAll(r.Body)
	var req struct {
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		return false, err
	}
	second := false
	for _, m := range req.Messages {
		switch m.Role {
		case "user":
			second = false
		case "tool":
			second = true
		}
	}
	return second, nil
}

// begin counts a request as a step and builds its answer: the publish
// call for a first step, the closing text for a second. hold reports that
// this is the first second-step request and Hold is set. While Fail is in
// force it counts the request as refused instead and returns the status
// to refuse it with, so a refused request is not a step.
func (p *Provider) begin(second bool) (reply string, hold bool, status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if status := p.failing; status != 0 {
		p.refused++
		return "", false, status
	}
	if second {
		p.second++
		p.inSecond++
		hold = p.Hold != nil && p.second == 1
		return completion(p.first+p.second, "stop", `"content": "Report filed."`, SecondIn, SecondOut), hold, 0
	}
	p.first++
	args, _ := json.Marshal(map[string]string{"subject": p.Subject, "text": p.Text})
	quoted, _ := json.Marshal(string(args))
	call := fmt.Sprintf(`"content": null, "tool_calls": [{"id": "call_%d", "type": "function", "function": {"name": "publish", "arguments": %s}}]`, p.first, quoted)
	return completion(p.first+p.second, "tool_calls", call, FirstIn, FirstOut), false, 0
}

// waitSecond delays a second-step answer: held until Hold is closed when
// hold is set (closing Held to say it arrived), then SecondDelay. It
// reports false when the client went away meanwhile, as a worker killed
// while it waits does, so the answer is not written.
func (p *Provider) waitSecond(ctx context.Context, hold bool) bool {
	if hold {
		close(p.Held)
		select {
		case <-p.Hold:
		case <-ctx.Done():
			return false
		}
	}
	select {
	case <-time.After(p.SecondDelay):
	case <-ctx.Done():
		return false
	}
	return true
}

// endSecond ends a second-step request, whether answered or not, for
// Counts' inSecond.
func (p *Provider) endSecond() {
	p.mu.Lock()
	p.inSecond--
	p.mu.Unlock()
}

// countAnswer counts an answer written whole to its client, for Answered.
func (p *Provider) countAnswer(second bool) {
	p.mu.Lock()
	if second {
		p.answeredSecond++
	} else {
		p.answeredFirst++
	}
	p.mu.Unlock()
}

// refuse answers with status and an error object as OpenAI's API does.
func refuse(w http.ResponseWriter, status int) {
	typ, msg := "server_error", "The server had an error while processing your request."
	if status == http.StatusTooManyRequests {
		typ, msg = "rate_limit_exceeded", "Rate limit reached. Please try again in 1s."
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, `{"error": {"message": %q, "type": %q, "param": null, "code": null}}`, msg, typ)
}

// completion is a chat.completion object with one choice.
func completion(n int, finish, message string, in, out int) string {
	return fmt.Sprintf(`{"id": "chatcmpl-fake-%d", "object": "chat.completion", "created": %d, "model": "gpt-fake",
  "choices": [{"index": 0, "finish_reason": %q, "logprobs": null, "message": {"role": "assistant", %s, "refusal": null, "annotations": []}}],
  "usage": {"prompt_tokens": %d, "completion_tokens": %d, "total_tokens": %d}}`, n, time.Now().Unix(), finish, message, in, out, in+out)
}
