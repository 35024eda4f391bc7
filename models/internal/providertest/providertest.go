// Package providertest is the test kit the model providers' tests share:
// a fake HTTP server that answers with canned replies and records what it
// got, a retry policy that records instead of sleeping, and a real ADK
// turn in which a model calls a weather tool. Each provider's tests keep
// their own wire-format bodies and assertions.
package providertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/adk/agent"
	"google.golang.org/adk/agent/llmagent"
	"google.golang.org/adk/model"
	"google.golang.org/adk/runner"
	"google.golang.org/adk/session"
	"google.golang.org/adk/tool"
	"google.golang.org/adk/tool/functiontool"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/models/retry"
)

// Received is one request as the fake server saw it.
type Received struct {
	Method, Path string
	Header       http.Header
	Body         map[string]any
}

// Server answers each request with the next reply; the last reply
// repeats. It is closed when the test ends.
type Server struct {
	URL string

	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	got     []Received
	replies []http.HandlerFunc
}

// NewServer starts a fake provider answering with replies in order.
func NewServer(t *testing.T, replies ...http.HandlerFunc) *Server {
	t.Helper()
	s := &Server{t: t, replies: replies}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	s.URL = s.srv.URL
	return s
}

// Client returns an HTTP client for the server.
func (s *Server) Client() *http.Client { return s.srv.Client() }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		s.t.Errorf("request body is not JSON: %v: %s", err, raw)
	}
	s.mu.Lock()
	s.got = append(s.got, Received{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	reply := s.replies[min(len(s.got), len(s.replies))-1]
	s.mu.Unlock()
	reply(w, r)
}

// Requests returns what the server received so far.
func (s *Server) Requests() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Received(nil), s.got...)
}

// Reply answers with status and a JSON body, plus header name/value pairs.
func Reply(status int, body string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// Attempts records what a retry policy did, so no test sleeps.
type Attempts struct {
	mu       sync.Mutex
	waits    []time.Duration
	outcomes []string
}

// Policy returns a retry policy that records its waits and outcomes.
func (a *Attempts) Policy(maxRetries int) retry.Policy {
	return retry.Policy{
		MaxRetries: maxRetries,
		Base:       time.Second,
		Max:        time.Minute,
		Rand:       func() float64 { return 0.5 },
		Sleep: func(ctx context.Context, d time.Duration) error {
			a.mu.Lock()
			a.waits = append(a.waits, d)
			a.mu.Unlock()
			return ctx.Err()
		},
		OnAttempt: func(o string) {
			a.mu.Lock()
			a.outcomes = append(a.outcomes, o)
			a.mu.Unlock()
		},
	}
}

// Snapshot returns the waits and outcomes so far.
func (a *Attempts) Snapshot() ([]time.Duration, []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Duration(nil), a.waits...), append([]string(nil), a.outcomes...)
}

// UserRequest is a request with one user text.
func UserRequest(text string) *model.LLMRequest {
	return &model.LLMRequest{Contents: []*genai.Content{genai.NewContentFromText(text, genai.RoleUser)}}
}

// Generate runs one GenerateContent call and returns its single result.
func Generate(ctx context.Context, m model.LLM, req *model.LLMRequest) (*model.LLMResponse, error) {
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

// WeatherArgs are the weather tool's arguments.
type WeatherArgs struct {
	City string `json:"city" jsonschema:"the city to look up"`
}

// WeatherResult is what the weather tool returns: 18°C and sunny.
type WeatherResult struct {
	TempC     int    `json:"temp_c"`
	Condition string `json:"condition"`
}

// WeatherTurn runs one real ADK turn ("Weather in Paris?") of an agent on
// m that has a get_weather tool, and returns the turn's events and the
// cities the tool was asked about.
func WeatherTurn(t *testing.T, app string, m model.LLM) (events []*session.Event, cities []string) {
	t.Helper()
	weather, err := functiontool.New(
		functiontool.Config{Name: "get_weather", Description: "Current weather for a city."},
		func(_ tool.Context, a WeatherArgs) (WeatherResult, error) {
			cities = append(cities, a.City)
			return WeatherResult{TempC: 18, Condition: "sunny"}, nil
		},
	)
	if err != nil {
		t.Fatal(err)
	}
	ag, err := llmagent.New(llmagent.Config{
		Name:        "forecaster",
		Model:       m,
		Instruction: "You answer weather questions.",
		Tools:       []tool.Tool{weather},
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := runner.New(runner.Config{AppName: app, Agent: ag, SessionService: session.InMemoryService(), AutoCreateSession: true})
	if err != nil {
		t.Fatal(err)
	}
	for ev, err := range r.Run(t.Context(), "u1", "s1", genai.NewContentFromText("Weather in Paris?", genai.RoleUser), agent.RunConfig{}) {
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		events = append(events, ev)
	}
	return events, cities
}

// Describe sums an event up for a shape assertion: "call NAME",
// "response NAME", "final TEXT" or "other TEXT", thought parts left out of
// TEXT.
func Describe(ev *session.Event) string {
	if ev.Content == nil {
		return "empty"
	}
	var text strings.Builder
	for _, p := range ev.Content.Parts {
		switch {
		case p.FunctionCall != nil:
			return "call " + p.FunctionCall.Name
		case p.FunctionResponse != nil:
			return "response " + p.FunctionResponse.Name
		}
		if !p.Thought { // a thought is not what the model said
			text.WriteString(p.Text)
		}
	}
	if ev.IsFinalResponse() {
		return "final " + text.String()
	}
	return "other " + text.String()
}

// JS renders v as indented JSON for failure messages.
func JS(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}
