package providersuite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/models/internal/providertest"
	"github.com/agent-worker/agent-worker/models/retry"
)

// suiteCase is one subtest of Run.
type suiteCase struct {
	name string
	run  func(t *testing.T)
}

// cases are Run's subtests in order, by name; InvalidToolCallFailsTheTurn
// is there only for a provider with a BadToolCall.
func (p Provider) cases() []suiteCase {
	cs := []suiteCase{
		{"ToolTurnThroughADK", p.toolTurnThroughADK},
		{"UsageRecorded", p.usageRecorded},
		{"RateLimitedThenOK", p.rateLimitedThenOK},
		{"ServerErrorRetriedToTheLimit", p.serverErrorRetriedToTheLimit},
		{"BadRequestNotRetried", p.badRequestNotRetried},
		{"CancelMidRequest", p.cancelMidRequest},
		{"KeyNeverLoggedOrReturned", p.keyNeverLoggedOrReturned},
	}
	if p.BadToolCall != nil {
		cs = append(cs, suiteCase{"InvalidToolCallFailsTheTurn", p.invalidToolCallFailsTheTurn})
	}
	return cs
}

// toolTurnThroughADK checks that the model calls the tool through a real
// ADK turn, with the key and the extra header on every request, and answers
// with the tool's result.
func (p Provider) toolTurnThroughADK(t *testing.T) {
	tt := p.ToolTurn
	s := providertest.NewServer(t, tt.Call, p.OK)
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
	reqs := s.Requests()
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
}

// usageRecorded checks that the reply's usage comes out as usage metadata,
// as the cost guardrail reads it, and at the model's list price.
func (p Provider) usageRecorded(t *testing.T) {
	s := providertest.NewServer(t, p.OK)
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
}

// rateLimitedThenOK checks that each 429 is retried after the wait the
// server asked for.
func (p Provider) rateLimitedThenOK(t *testing.T) {
	if len(p.RateLimited) == 0 {
		t.Fatal("no rate-limit replies")
	}
	for _, c := range p.RateLimited {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			s := providertest.NewServer(t, c.Reply, p.OK)
			var a providertest.Attempts
			m := p.model(t, s.URL, a.Policy(3), nil)
			if _, err := generate(t.Context(), m); err != nil {
				t.Fatal(err)
			}
			if n := len(s.Requests()); n != 2 {
				t.Errorf("server got %d requests, want 2", n)
			}
			waits, outcomes := a.Snapshot()
			if !reflect.DeepEqual(waits, []time.Duration{2 * time.Second}) {
				t.Errorf("waits = %v, want [2s] as the server asked", waits)
			}
			if !reflect.DeepEqual(outcomes, []string{retry.OutcomeRateLimited, retry.OutcomeOK}) {
				t.Errorf("outcomes = %q", outcomes)
			}
		})
	}
}

// serverErrorRetriedToTheLimit checks that a 5xx is retried MaxRetries
// times with jittered backoff, then the call fails.
func (p Provider) serverErrorRetriedToTheLimit(t *testing.T) {
	s := providertest.NewServer(t, p.ServerError.Replies...)
	var a providertest.Attempts
	m := p.model(t, s.URL, a.Policy(2), nil)
	_, err := generate(t.Context(), m)
	if err == nil {
		t.Fatal("want an error")
	}
	if n := len(s.Requests()); n != 3 {
		t.Errorf("server got %d requests, want MaxRetries+1 = 3", n)
	}
	if err.Error() != p.ServerError.Err {
		t.Errorf("error = %q\nwant    %q", err, p.ServerError.Err)
	}
	waits, outcomes := a.Snapshot()
	if !reflect.DeepEqual(outcomes, []string{"retry", "retry", "error"}) {
		t.Errorf("outcomes = %q", outcomes)
	}
	if !reflect.DeepEqual(waits, []time.Duration{500 * time.Millisecond, time.Second}) {
		t.Errorf("waits = %v, want jittered 0.5·1s, 0.5·2s", waits)
	}
}

// badRequestNotRetried checks that a 400 fails the call at once with the
// server's message.
func (p Provider) badRequestNotRetried(t *testing.T) {
	s := providertest.NewServer(t, p.BadRequest.Reply)
	var a providertest.Attempts
	m := p.model(t, s.URL, a.Policy(3), nil)
	_, err := generate(t.Context(), m)
	if n := len(s.Requests()); n != 1 {
		t.Errorf("server got %d requests, want 1", n)
	}
	var se *retry.StatusError
	if !errors.As(err, &se) || se.StatusCode != 400 || se.Message != p.BadRequest.Message {
		t.Fatalf("error = %v, want a 400 StatusError with the server's message", err)
	}
	if err.Error() != p.BadRequest.Err {
		t.Errorf("error text = %q\nwant         %q", err, p.BadRequest.Err)
	}
	if _, outcomes := a.Snapshot(); !reflect.DeepEqual(outcomes, []string{"error"}) {
		t.Errorf("outcomes = %q", outcomes)
	}
}

// cancelMidRequest checks that canceling the context aborts the request in
// flight and returns context.Canceled.
func (p Provider) cancelMidRequest(t *testing.T) {
	arrived := make(chan struct{})
	released := make(chan struct{})
	s := providertest.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done() // the client hung up
		close(released)
	})
	var a providertest.Attempts
	m := p.model(t, s.URL, a.Policy(3), nil)
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
	if _, outcomes := a.Snapshot(); !reflect.DeepEqual(outcomes, []string{"canceled"}) {
		t.Errorf("outcomes = %q", outcomes)
	}
	if n := len(s.Requests()); n != 1 {
		t.Errorf("server got %d requests, want 1", n)
	}
}

// keyNeverLoggedOrReturned checks that the API key reaches the server but
// never an error or a log line.
func (p Provider) keyNeverLoggedOrReturned(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := providertest.NewServer(t, p.KeyInError.Replies...)
	var a providertest.Attempts
	m := p.model(t, s.URL, a.Policy(2), log)
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
	if got := header(t, s, 0).Get(p.AuthHeader); got != p.AuthValue {
		t.Errorf("%s = %q, want %q", p.AuthHeader, got, p.AuthValue)
	}
}

// invalidToolCallFailsTheTurn checks that a tool call whose arguments are
// not a JSON object fails the call, unretried.
func (p Provider) invalidToolCallFailsTheTurn(t *testing.T) {
	s := providertest.NewServer(t, p.BadToolCall.Reply)
	var a providertest.Attempts
	m := p.model(t, s.URL, a.Policy(3), nil)
	_, err := generate(t.Context(), m)
	if err == nil || !strings.Contains(err.Error(), p.BadToolCall.Err) {
		t.Fatalf("error = %v, want one containing %q", err, p.BadToolCall.Err)
	}
	if n := len(s.Requests()); n != 1 {
		t.Errorf("server got %d requests, want 1 (a bad answer is not retried)", n)
	}
}
