// Package providersuite is the conformance suite every model provider
// (OpenAI, Anthropic, Gemini) runs, so they promise the same things about
// usage, retries, failures and the API key. Each provider's tests supply
// only their wire format, as canned HTTP replies, and the values their
// API makes of them; the suite serves those replies from a fake server
// and checks what the model does with them.
//
// It serves and records with the providers' test kit,
// models/internal/providertest.
package providersuite

import (
	"context"
	"log/slog"
	"net/http"
	"testing"

	"google.golang.org/adk/model"
	"google.golang.org/adk/session"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/models/internal/providertest"
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
	Check func(t *testing.T, events []*session.Event, reqs []providertest.Received)
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

// header returns the headers of the server's request number i.
func header(t *testing.T, s *providertest.Server, i int) http.Header {
	t.Helper()
	got := s.Requests()
	if i >= len(got) {
		t.Fatalf("server got %d requests, none numbered %d", len(got), i)
	}
	return got[i].Header
}

// generate makes one non-streamed call with one user text, "hi", and
// returns its single result.
func generate(ctx context.Context, m model.LLM) (*model.LLMResponse, error) {
	return providertest.Generate(ctx, m, providertest.UserRequest("hi"))
}
