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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
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

// Run runs the conformance suite; the cases run in parallel.
func Run(t *testing.T, p Provider) {
	t.Run("ToolTurnThroughADK", func(t *testing.T) {
		t.Parallel()
		tt := p.ToolTurn
		s := serve(t, tt.Call, p.OK)
		m := p.model(t, s.URL, retry.Policy{}, nil)

		events, cities := tt.Run(t, tt.App, m)

		var shape []string
		for _, ev := range events {
			shape = append(shape, tt.Describe(ev))
		}
		want := []string{"call get_weather", "response get_weather", "final It is 18°C and sunny in Paris."}
		if !reflect.DeepEqual(shape, want) {
			t.Fatalf("events = %q\nwant     %q", shape, want)
		}
		if !reflect.DeepEqual(cities, []string{"Paris"}) {
			t.Errorf("tool saw cities %q", cities)
		}
		reqs := s.requests()
		if len(reqs) != 2 {
			t.Fatalf("server got %d requests, want 2", len(reqs))
		}
		for i, rq := range reqs {
			if rq.Method != http.MethodPost || rq.Path != tt.Path {
				t.Errorf("request %d: %s %s, want POST %s", i, rq.Method, rq.Path, tt.Path)
			}
			if got := rq.Header.Get(p.AuthHeader); got != p.AuthValue {
				t.Errorf("request %d: %s = %q, want %q", i, p.AuthHeader, got, p.AuthValue)
			}
			if got := rq.Header.Get(tt.Header[0]); got != tt.Header[1] {
				t.Errorf("request %d: extra header %s = %q, want %q", i, tt.Header[0], got, tt.Header[1])
			}
		}
		tt.Check(t, events, reqs)
	})

	t.Run("UsageRecorded", func(t *testing.T) {
		t.Parallel()
		s := serve(t, p.OK)
		m := p.model(t, s.URL, retry.Policy{}, nil)
		resp, err := generate(t.Context(), m)
		if err != nil {
			t.Fatal(err)
		}
		u := p.Usage
		if !reflect.DeepEqual(resp.UsageMetadata, &u.Want) {
			t.Errorf("usage = %+v\nwant    %+v", resp.UsageMetadata, &u.Want)
		}
		if resp.FinishReason != genai.FinishReasonStop || resp.ModelVersion != u.ModelVersion || resp.Partial {
			t.Errorf("finish %q version %q partial %v", resp.FinishReason, resp.ModelVersion, resp.Partial)
		}
		if u.Also != nil {
			u.Also(t, resp)
		}
		gu := guard.UsageOf(resp.UsageMetadata, resp.CustomMetadata)
		if gu != u.Guard {
			t.Errorf("guard.UsageOf = %+v, want %+v", gu, u.Guard)
		}
		price, ok := guard.NewPrices(nil).Lookup(m.Name())
		if !ok {
			t.Fatalf("no price for %s", m.Name())
		}
		if got := price.Cost(gu); fmt.Sprintf("%.9f", got) != fmt.Sprintf("%.9f", u.Cost) {
			t.Errorf("cost = %.9f, want %.9f", got, u.Cost)
		}
	})

	t.Run("RateLimitedThenOK", func(t *testing.T) {
		t.Parallel()
		if len(p.RateLimited) == 0 {
			t.Fatal("no rate-limit replies")
		}
		for _, c := range p.RateLimited {
			t.Run(c.Name, func(t *testing.T) {
				t.Parallel()
				s := serve(t, c.Reply, p.OK)
				var a attempts
				m := p.model(t, s.URL, a.policy(3), nil)
				if _, err := generate(t.Context(), m); err != nil {
					t.Fatal(err)
				}
				if n := s.count(); n != 2 {
					t.Errorf("server got %d requests, want 2", n)
				}
				waits, outcomes := a.snapshot()
				if !reflect.DeepEqual(waits, []time.Duration{2 * time.Second}) {
					t.Errorf("waits = %v, want [2s] as the server asked", waits)
				}
				if !reflect.DeepEqual(outcomes, []string{retry.OutcomeRateLimited, retry.OutcomeOK}) {
					t.Errorf("outcomes = %q", outcomes)
				}
			})
		}
	})

	t.Run("ServerErrorRetriedToTheLimit", func(t *testing.T) {
		t.Parallel()
		s := serve(t, p.ServerError.Replies...)
		var a attempts
		m := p.model(t, s.URL, a.policy(2), nil)
		_, err := generate(t.Context(), m)
		if err == nil {
			t.Fatal("want an error")
		}
		if n := s.count(); n != 3 {
			t.Errorf("server got %d requests, want MaxRetries+1 = 3", n)
		}
		if err.Error() != p.ServerError.Err {
			t.Errorf("error = %q\nwant    %q", err, p.ServerError.Err)
		}
		waits, outcomes := a.snapshot()
		if !reflect.DeepEqual(outcomes, []string{"retry", "retry", "error"}) {
			t.Errorf("outcomes = %q", outcomes)
		}
		if !reflect.DeepEqual(waits, []time.Duration{500 * time.Millisecond, time.Second}) {
			t.Errorf("waits = %v, want jittered 0.5·1s, 0.5·2s", waits)
		}
	})

	t.Run("BadRequestNotRetried", func(t *testing.T) {
		t.Parallel()
		s := serve(t, p.BadRequest.Reply)
		var a attempts
		m := p.model(t, s.URL, a.policy(3), nil)
		_, err := generate(t.Context(), m)
		if n := s.count(); n != 1 {
			t.Errorf("server got %d requests, want 1", n)
		}
		var se *retry.StatusError
		if !errors.As(err, &se) || se.StatusCode != 400 || se.Message != p.BadRequest.Message {
			t.Fatalf("error = %v, want a 400 StatusError with the server's message", err)
		}
		if err.Error() != p.BadRequest.Err {
			t.Errorf("error text = %q\nwant         %q", err, p.BadRequest.Err)
		}
		if _, outcomes := a.snapshot(); !reflect.DeepEqual(outcomes, []string{"error"}) {
			t.Errorf("outcomes = %q", outcomes)
		}
	})

	t.Run("CancelMidRequest", func(t *testing.T) {
		t.Parallel()
		arrived := make(chan struct{})
		released := make(chan struct{})
		s := serve(t, func(w http.ResponseWriter, r *http.Request) {
			close(arrived)
			<-r.Context().Done() // the client hung up
			close(released)
		})
		var a attempts
		m := p.model(t, s.URL, a.policy(3), nil)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, err := generate(ctx, m)
			done <- err
		}()
		<-arrived
		cancel()
		select {
		case err := <-done:
			t.Logf("canceled call returned: %v", err)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("error = %v, want context.Canceled", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("GenerateContent did not return after cancel")
		}
		select {
		case <-released:
		case <-time.After(10 * time.Second):
			t.Fatal("the server never saw the request aborted")
		}
		if _, outcomes := a.snapshot(); !reflect.DeepEqual(outcomes, []string{"canceled"}) {
			t.Errorf("outcomes = %q", outcomes)
		}
		if n := s.count(); n != 1 {
			t.Errorf("server got %d requests, want 1", n)
		}
	})

	t.Run("KeyNeverLoggedOrReturned", func(t *testing.T) {
		t.Parallel()
		var logs bytes.Buffer
		log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		s := serve(t, p.KeyInError.Replies...)
		var a attempts
		m := p.model(t, s.URL, a.policy(2), log)
		_, err := generate(t.Context(), m)
		if err == nil {
			t.Fatal("want an error")
		}
		if strings.Contains(err.Error(), p.Key) || strings.Contains(fmt.Sprintf("%+v %#v", err, err), p.Key) {
			t.Errorf("error carries the key: %v", err)
		}
		if err.Error() != p.KeyInError.Err {
			t.Errorf("error = %q\nwant    %q", err, p.KeyInError.Err)
		}
		if !strings.Contains(logs.String(), "retrying") {
			t.Errorf("the retry was not logged:\n%s", logs.String())
		}
		if strings.Contains(logs.String(), p.Key) {
			t.Errorf("logs carry the key:\n%s", logs.String())
		}
		// The key did reach the server, where it belongs.
		if got := s.header(0).Get(p.AuthHeader); got != p.AuthValue {
			t.Errorf("%s = %q, want %q", p.AuthHeader, got, p.AuthValue)
		}
	})

	if p.BadToolCall != nil {
		t.Run("InvalidToolCallFailsTheTurn", func(t *testing.T) {
			t.Parallel()
			s := serve(t, p.BadToolCall.Reply)
			var a attempts
			m := p.model(t, s.URL, a.policy(3), nil)
			_, err := generate(t.Context(), m)
			if err == nil || !strings.Contains(err.Error(), p.BadToolCall.Err) {
				t.Fatalf("error = %v, want one containing %q", err, p.BadToolCall.Err)
			}
			if n := s.count(); n != 1 {
				t.Errorf("server got %d requests, want 1 (a bad answer is not retried)", n)
			}
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
