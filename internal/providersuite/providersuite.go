// Package providersuite is the conformance suite every model provider
// (OpenAI, Anthropic, Gemini) runs, so they promise the same things about
// usage, retries, failures and the API key. Each provider's tests supply
// only their wire format, as canned HTTP replies, and the values their
// API makes of them; the suite serves those replies from a fake server
// and checks what the model does with them.
//
// It carries its own small fake server and retry recorder: the providers'
// test kit, models/internal/providertest, cannot be imported from here.
package providersuite

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"google.golang.org/adk/model"
	"google.golang.org/adk/session"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/models/retry"
)

// Provider describes the provider under test.
type Provider struct {
	// New makes the model, talking to the fake server at url with the
	// provider's test key, retrying by pol and logging to log (nil: no
	// logs).
	New func(ctx context.Context, url string, pol retry.Policy, log *slog.Logger) (model.LLM, error)
	// Key is the API key New configures. AuthHeader is the request header
	// that must carry it to the server, as AuthValue.
	Key                   string
	AuthHeader, AuthValue string
	// OK is a successful text reply; the suite retries into it.
	OK http.HandlerFunc
	// Usage is what OK must come to.
	Usage Usage
	// RateLimited are 429 replies, each asking for a wait of 2s in its
	// own way; each is a subtest.
	RateLimited []Named
	// ServerError fails every attempt with a 5xx.
	ServerError Failure
	// BadRequest is a 400, which is not retried.
	BadRequest BadRequest
	// KeyInError fails a retry with a 5xx, then for good, both replies
	// quoting Key, which must come out redacted.
	KeyInError Failure
	// BadToolCall, if set, is a reply whose tool call the model refuses.
	BadToolCall *BadToolCall
	// ToolTurn is a real ADK turn in which the model calls a tool.
	ToolTurn ToolTurn
}

// ToolTurn is an ADK turn, "Weather in Paris?", of an agent whose
// get_weather tool finds 18°C and sunny: the model calls the tool, then
// answers "It is 18°C and sunny in Paris.".
type ToolTurn struct {
	// Run runs the turn on m under the app name and returns its events and
	// the cities the tool was asked about; Describe sums an event up as
	// "call NAME", "response NAME" or "final TEXT" (the providers' test
	// kit has both).
	Run      func(t *testing.T, app string, m model.LLM) ([]*session.Event, []string)
	Describe func(ev *session.Event) string
	App      string
	// Call is the model's call of get_weather for Paris; Provider.OK is
	// its answer once it has the weather.
	Call http.HandlerFunc
	// Path is where every request is POSTed. Header is a header name and
	// value New sets as an extra header, which every request must carry.
	Path   string
	Header [2]string
	// Check checks the rest: the events and requests in the provider's
	// terms.
	Check func(t *testing.T, events []*session.Event, reqs []Request)
}

// Usage is what the model must make of OK's usage.
type Usage struct {
	// Want is the response's usage metadata, compared whole.
	Want genai.GenerateContentResponseUsageMetadata
	// ModelVersion is the response's model version; its finish reason is
	// STOP and it is not partial.
	ModelVersion string
	// Guard is what the cost guardrail reads, and Cost what that costs at
	// the model's list price.
	Guard guard.Usage
	Cost  float64
	// Also checks what else the provider puts in the response.
	Also func(t *testing.T, resp *model.LLMResponse)
}

// Named is a reply under a subtest name.
type Named struct {
	Name  string
	Reply http.HandlerFunc
}

// Failure is a call the server fails: its replies in turn, the last
// repeating, and the error text the call must return.
type Failure struct {
	Replies []http.HandlerFunc
	Err     string
}

// BadRequest is a 400 reply, the message in it, and the error text.
type BadRequest struct {
	Reply   http.HandlerFunc
	Message string
	Err     string
}

// BadToolCall is a reply whose tool call has arguments that are not a
// JSON object, and a part of the error that names the tool.
type BadToolCall struct {
	Reply http.HandlerFunc
	Err   string
}

// Run runs the conformance suite, each case a subtest named as in cases;
// the cases run in parallel.
func Run(t *testing.T, p Provider) {
	for _, c := range p.cases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t)
		})
	}
}

// model makes the model under test or fails the test.
func (p Provider) model(t *testing.T, url string, pol retry.Policy, log *slog.Logger) model.LLM {
	t.Helper()
	m, err := p.New(t.Context(), url, pol, log)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// WeatherParameters is the JSON schema of the tool turn's get_weather
// arguments, as every provider must declare it: ADK's schema of the test
// kit's WeatherArgs.
func WeatherParameters() map[string]any {
	return map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"properties": map[string]any{
			"city": map[string]any{"type": "string", "description": "the city to look up"},
		},
		"required": []any{"city"},
	}
}

// Request is one request as the fake server got it.
type Request struct {
	Method, Path string
	Header       http.Header
	Body         map[string]any
}

// server answers each request with the next reply, the last repeating,
// and keeps what it got. Every request body must be a JSON object.
type server struct {
	*httptest.Server
	t       *testing.T
	replies []http.HandlerFunc
	mu      sync.Mutex
	got     []Request
}

func serve(t *testing.T, replies ...http.HandlerFunc) *server {
	t.Helper()
	if len(replies) == 0 {
		t.Fatal("no replies to serve")
	}
	s := &server{t: t, replies: replies}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err != nil {
			s.t.Errorf("request body is not JSON: %v: %s", err, raw)
		}
		s.mu.Lock()
		s.got = append(s.got, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
		next := s.replies[min(len(s.got), len(s.replies))-1]
		s.mu.Unlock()
		next(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.got...)
}

func (s *server) count() int { return len(s.requests()) }

func (s *server) header(i int) http.Header {
	got := s.requests()
	if i >= len(got) {
		s.t.Fatalf("server got %d requests, none numbered %d", len(got), i)
	}
	return got[i].Header
}

// attempts records what a retry policy did, so no case sleeps.
type attempts struct {
	mu       sync.Mutex
	waits    []time.Duration
	outcomes []string
}

// policy retries maxRetries times from a 1s base, jittered by exactly
// one half.
func (a *attempts) policy(maxRetries int) retry.Policy {
	return retry.Policy{
		MaxRetries: maxRetries,
		Base:       time.Second,
		Max:        time.Minute,
		Rand:       func() float64 { return 0.5 },
		Sleep: func(ctx context.Context, d time.Duration) error {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.waits = append(a.waits, d)
			return ctx.Err()
		},
		OnAttempt: func(o string) {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.outcomes = append(a.outcomes, o)
		},
	}
}

func (a *attempts) snapshot() ([]time.Duration, []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Duration(nil), a.waits...), append([]string(nil), a.outcomes...)
}

// generate makes one non-streamed call with one user text, "hi", and
// returns its single result.
func generate(ctx context.Context, m model.LLM) (*model.LLMResponse, error) {
	req := &model.LLMRequest{Contents: []*genai.Content{genai.NewContentFromText("hi", genai.RoleUser)}}
	var (
		resp *model.LLMResponse
		err  error
		n    int
	)
	for r, e := range m.GenerateContent(ctx, req, false) {
		resp, err = r, e
		n++
	}
	if n != 1 {
		return nil, fmt.Errorf("GenerateContent yielded %d times, want 1", n)
	}
	return resp, err
}
