package retry

import (
	"github.com/agent-worker/agent-worker/outage"

	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// spy collects what a Policy did, so that no test sleeps.
type spy struct {
	mu       sync.Mutex
	waits    []time.Duration
	outcomes []string
}

func (r *spy) sleep(ctx context.Context, d time.Duration) error {
	r.mu.Lock()
	r.waits = append(r.waits, d)
	r.mu.Unlock()
	return ctx.Err()
}

func (r *spy) attempt(o string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcomes = append(r.outcomes, o)
}

func (r *spy) policy(maxRetries int) Policy {
	return Policy{
		MaxRetries: maxRetries,
		Base:       100 * time.Millisecond,
		Max:        5 * time.Second,
		Sleep:      r.sleep,
		Rand:       func() float64 { return 0.5 },
		OnAttempt:  r.attempt,
	}
}

// script returns an op that fails with errs in order, then succeeds.
func script(errs ...error) (func(context.Context) error, *int) {
	n := 0
	return func(context.Context) error {
		n++
		if n <= len(errs) {
			return errs[n-1]
		}
		return nil
	}, &n
}

func status(code int, retryAfter time.Duration) error {
	return &StatusError{Provider: "test", StatusCode: code, Message: "msg " + fmt.Sprint(code), RetryAfter: retryAfter}
}

func TestDoOutcomes(t *testing.T) {
	t.Parallel()
	netErr := &url.Error{Op: "Post", URL: "http://127.0.0.1:1/x", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}
	tests := []struct {
		name         string
		maxRetries   int
		errs         []error
		wantCalls    int
		wantOutcomes []string
		wantWaits    []time.Duration
		wantErr      string // substring; "" means success
		wantOutage   bool   // the error marks a provider outage
	}{
		{
			name: "ok first time", maxRetries: 3,
			wantCalls: 1, wantOutcomes: []string{OutcomeOK},
		},
		{
			name: "429 with Retry-After then ok", maxRetries: 3,
			errs:      []error{status(429, 2*time.Second)},
			wantCalls: 2, wantOutcomes: []string{OutcomeRateLimited, OutcomeOK},
			wantWaits: []time.Duration{2 * time.Second},
		},
		{
			name: "Retry-After capped at Max", maxRetries: 3,
			errs:      []error{status(503, time.Hour)},
			wantCalls: 2, wantOutcomes: []string{OutcomeRetry, OutcomeOK},
			wantWaits: []time.Duration{5 * time.Second},
		},
		{
			name: "500 until the limit", maxRetries: 2,
			errs:         []error{status(500, 0), status(502, 0), status(500, 0)},
			wantCalls:    3,
			wantOutcomes: []string{OutcomeRetry, OutcomeRetry, OutcomeError},
			// Rand 0.5 of ceilings 100ms, 200ms.
			wantWaits:  []time.Duration{50 * time.Millisecond, 100 * time.Millisecond},
			wantErr:    "test: 500 Internal Server Error: msg 500 (gave up after 3 attempts)",
			wantOutage: true,
		},
		{
			name: "400 not retried", maxRetries: 3,
			errs:      []error{status(400, 0)},
			wantCalls: 1, wantOutcomes: []string{OutcomeError},
			wantErr: "test: 400 Bad Request: msg 400",
		},
		{
			name: "401 not retried even with Retry-After", maxRetries: 3,
			errs:      []error{status(401, time.Second)},
			wantCalls: 1, wantOutcomes: []string{OutcomeError},
			wantErr: "401 Unauthorized",
		},
		{
			name: "final 429 is an error", maxRetries: 1,
			errs:      []error{status(429, 0), status(429, 0)},
			wantCalls: 2, wantOutcomes: []string{OutcomeRateLimited, OutcomeError},
			wantWaits:  []time.Duration{50 * time.Millisecond},
			wantErr:    "429 Too Many Requests",
			wantOutage: true,
		},
		{
			name: "network error retried", maxRetries: 3,
			errs:      []error{fmt.Errorf("openai: %w", netErr)},
			wantCalls: 2, wantOutcomes: []string{OutcomeRetry, OutcomeOK},
			wantWaits: []time.Duration{50 * time.Millisecond},
		},
		{
			name: "attempt timeout retried", maxRetries: 3,
			errs:      []error{fmt.Errorf("%w after 1s", ErrTimeout), io.ErrUnexpectedEOF},
			wantCalls: 3, wantOutcomes: []string{OutcomeRetry, OutcomeRetry, OutcomeOK},
			wantWaits: []time.Duration{50 * time.Millisecond, 100 * time.Millisecond},
		},
		{
			name: "unknown error not retried", maxRetries: 3,
			errs:      []error{errors.New("bad tool arguments")},
			wantCalls: 1, wantOutcomes: []string{OutcomeError},
			wantErr: "bad tool arguments",
		},
		{
			name: "permanent wins over status", maxRetries: 3,
			errs:      []error{Permanent(status(503, 0))},
			wantCalls: 1, wantOutcomes: []string{OutcomeError},
			wantErr: "503",
		},
		{
			name: "no retries configured", maxRetries: 0,
			errs:      []error{status(503, 0)},
			wantCalls: 1, wantOutcomes: []string{OutcomeError},
			wantErr:    "test: 503 Service Unavailable: msg 503",
			wantOutage: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var rec spy
			op, calls := script(tt.errs...)
			err := rec.policy(tt.maxRetries).Do(t.Context(), op)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("Do = %v, want success", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Do = %v, want error containing %q", err, tt.wantErr)
			}
			if tt.wantErr != "" && outage.Is(err) != tt.wantOutage {
				t.Errorf("outage.Is(%v) = %v, want %v", err, outage.Is(err), tt.wantOutage)
			}
			if *calls != tt.wantCalls {
				t.Errorf("op called %d times, want %d", *calls, tt.wantCalls)
			}
			if !reflect.DeepEqual(rec.outcomes, tt.wantOutcomes) {
				t.Errorf("outcomes = %q, want %q", rec.outcomes, tt.wantOutcomes)
			}
			if !reflect.DeepEqual(rec.waits, tt.wantWaits) {
				t.Errorf("waits = %v, want %v", rec.waits, tt.wantWaits)
			}
		})
	}
}

func TestErrorKeepsStatus(t *testing.T) {
	t.Parallel()
	var rec spy
	op, _ := script(status(500, 0), status(500, 0))
	err := rec.policy(1).Do(t.Context(), op)
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != 500 {
		t.Fatalf("errors.As(%v) = %v, want the *StatusError with 500", err, se)
	}
}

func TestBackoffBounds(t *testing.T) {
	t.Parallel()
	p := Policy{Base: 100 * time.Millisecond, Max: time.Second}
	for attempt := 1; attempt <= 12; attempt++ {
		ceiling := min(100*time.Millisecond<<(attempt-1), time.Second)
		for _, f := range []float64{0, 0.25, 0.999999} {
			p.Rand = func() float64 { return f }
			got := p.Backoff(attempt, 0)
			want := time.Duration(f * float64(ceiling))
			if got != want {
				t.Errorf("Backoff(%d) with rand %v = %v, want %v", attempt, f, got, want)
			}
			if got < 0 || got >= ceiling {
				t.Errorf("Backoff(%d) = %v, outside [0, %v)", attempt, got, ceiling)
			}
		}
	}
	// With the real source, every draw stays in [0, ceiling).
	p.Rand = nil
	for range 1000 {
		if d := p.Backoff(3, 0); d < 0 || d >= 400*time.Millisecond {
			t.Fatalf("Backoff(3) = %v, outside [0, 400ms)", d)
		}
	}
	// Huge attempt numbers neither overflow nor pass Max.
	p.Rand = func() float64 { return 0.999 }
	if d := p.Backoff(1000, 0); d <= 0 || d > time.Second {
		t.Errorf("Backoff(1000) = %v, want in (0, 1s]", d)
	}
	// A bad Rand is treated as 0, not as a longer wait.
	p.Rand = func() float64 { return 7 }
	if d := p.Backoff(2, 0); d != 0 {
		t.Errorf("Backoff with rand 7 = %v, want 0", d)
	}
	// Zero fields take the defaults.
	var zero Policy
	zero.Rand = func() float64 { return 0.5 }
	if d := zero.Backoff(1, 0); d != DefaultBase/2 {
		t.Errorf("zero Policy Backoff(1) = %v, want %v", d, DefaultBase/2)
	}
	if d := zero.Backoff(1, time.Hour); d != DefaultMax {
		t.Errorf("zero Policy Retry-After 1h = %v, want %v", d, DefaultMax)
	}
}

func TestRetryAfterForms(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 10, 21, 7, 28, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header http.Header
		want   time.Duration
	}{
		{"seconds", http.Header{"Retry-After": {"2"}}, 2 * time.Second},
		{"seconds with spaces", http.Header{"Retry-After": {" 120 "}}, 2 * time.Minute},
		{"fractional seconds", http.Header{"Retry-After": {"1.5"}}, 1500 * time.Millisecond},
		{"http date", http.Header{"Retry-After": {"Tue, 21 Oct 2025 07:28:30 GMT"}}, 30 * time.Second},
		{"past date", http.Header{"Retry-After": {"Tue, 21 Oct 2025 07:00:00 GMT"}}, 0},
		{"zero", http.Header{"Retry-After": {"0"}}, 0},
		{"negative", http.Header{"Retry-After": {"-5"}}, 0},
		{"garbage", http.Header{"Retry-After": {"soon"}}, 0},
		{"absent", http.Header{}, 0},
		{"retry-after-ms wins", http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"9"}}, 250 * time.Millisecond},
		{"bad retry-after-ms falls back", http.Header{"Retry-After-Ms": {"x"}, "Retry-After": {"3"}}, 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := RetryAfter(tt.header, now); got != tt.want {
				t.Errorf("RetryAfter(%v) = %v, want %v", tt.header, got, tt.want)
			}
		})
	}
}

func TestCancelDuringWait(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	waiting := make(chan struct{})
	var outcomes []string
	p := Policy{
		MaxRetries: 5,
		Base:       time.Hour,
		Max:        time.Hour,
		Rand:       func() float64 { return 0.5 },
		OnAttempt:  func(o string) { outcomes = append(outcomes, o) },
	}
	// The default timer, announced: the wait starts, and only ctx ends it.
	p.Sleep = func(ctx context.Context, d time.Duration) error {
		close(waiting)
		return Policy{}.sleep(ctx, d)
	}
	calls := 0
	done := make(chan error, 1)
	go func() {
		done <- p.Do(ctx, func(context.Context) error {
			calls++
			return status(503, 0)
		})
	}()
	<-waiting
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Do = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Do did not return after cancel during the backoff wait")
	}
	if calls != 1 {
		t.Errorf("op called %d times, want 1", calls)
	}
	if !reflect.DeepEqual(outcomes, []string{OutcomeRetry}) {
		t.Errorf("outcomes = %q, want only the retried attempt", outcomes)
	}
}

func TestCancelDuringAttempt(t *testing.T) {
	t.Parallel()
	cause := errors.New("operator interrupt")
	ctx, cancel := context.WithCancelCause(t.Context())
	var rec spy
	err := rec.policy(3).Do(ctx, func(ctx context.Context) error {
		cancel(cause)
		<-ctx.Done()
		return fmt.Errorf("test: %w", ctx.Err())
	})
	if !errors.Is(err, context.Canceled) || !errors.Is(err, cause) {
		t.Fatalf("Do = %v, want both context.Canceled and the cause", err)
	}
	if !reflect.DeepEqual(rec.outcomes, []string{OutcomeCanceled}) || len(rec.waits) != 0 {
		t.Errorf("outcomes %q waits %v, want [canceled] and no wait", rec.outcomes, rec.waits)
	}
}

func TestCanceledBeforeStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var rec spy
	op, calls := script()
	if err := rec.policy(3).Do(ctx, op); !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v, want context.Canceled", err)
	}
	if *calls != 0 || len(rec.outcomes) != 0 {
		t.Errorf("calls %d outcomes %q, want none", *calls, rec.outcomes)
	}
}

func TestDefaultSleepHonoursContext(t *testing.T) {
	t.Parallel()
	var p Policy
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := p.sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("sleep on a canceled context = %v", err)
	}
	if err := p.sleep(t.Context(), 0); err != nil {
		t.Fatalf("sleep(0) = %v", err)
	}
}

func TestRetriesAreLogged(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	var rec spy
	p := rec.policy(2)
	p.Log = slog.New(slog.NewTextHandler(&buf, nil))
	op, _ := script(status(429, 2*time.Second), status(500, 0), status(500, 0))
	_ = p.Do(t.Context(), op)
	out := buf.String()
	for _, want := range []string{
		`msg="model request failed, retrying" status=429 attempt=1 max_attempts=3 wait=2s`,
		`status=500 attempt=2 max_attempts=3 wait=100ms`,
		`msg="model request failed, retries exhausted" status=500 attempts=3`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

func TestWithTimeout(t *testing.T) {
	t.Parallel()
	err := WithTimeout(t.Context(), time.Nanosecond, func(ctx context.Context) error {
		<-ctx.Done()
		return fmt.Errorf("test: %w", ctx.Err())
	})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("WithTimeout = %v, want ErrTimeout", err)
	}
	// The caller's own cancellation is not a timeout.
	ctx, cancel := context.WithCancel(t.Context())
	err = WithTimeout(ctx, time.Hour, func(ctx context.Context) error {
		cancel()
		<-ctx.Done()
		return ctx.Err()
	})
	if errors.Is(err, ErrTimeout) || !errors.Is(err, context.Canceled) {
		t.Fatalf("WithTimeout after cancel = %v, want context.Canceled only", err)
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	base := fmt.Errorf("wrapped: %w", context.Canceled)
	err := Redact(fmt.Errorf("key sk-secret-123 rejected: %w", base), "sk-secret-123", "")
	if strings.Contains(err.Error(), "sk-secret-123") || !strings.Contains(err.Error(), "[redacted]") {
		t.Errorf("Redact = %q", err)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Redact lost the wrapped error")
	}
	if Redact(base, "absent") != base {
		t.Errorf("Redact changed an error without secrets")
	}
}

func TestTransportRecordsStatusAndBody(t *testing.T) {
	t.Parallel()
	body := `{"error":{"message":"Rate limit reached for key sk-abcdef","type":"rate_limit_error"}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	client := &http.Client{Transport: Transport(srv.Client().Transport)}

	ctx, seen := Record(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if string(got) != body {
		t.Errorf("caller read %q, want the whole body %q", got, body)
	}
	r, ok := seen()
	if !ok || r.StatusCode != 429 {
		t.Fatalf("seen = %+v, %v", r, ok)
	}
	se := r.Error("openai", "sk-abcdef")
	want := "openai: 429 Too Many Requests (rate_limit_error): Rate limit reached for key [redacted]"
	if se.Error() != want || se.RetryAfter != 7*time.Second {
		t.Errorf("Error() = %q RetryAfter %v\nwant       %q 7s", se.Error(), se.RetryAfter, want)
	}

	// Without a spy in the context nothing is noted.
	req, _ = http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
}

func TestErrorMessageShapes(t *testing.T) {
	t.Parallel()
	tests := []struct{ body, typ, msg string }{
		{`{"error":{"message":"bad","type":"invalid_request_error","param":null,"code":null}}`, "invalid_request_error", "bad"},
		{`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "overloaded_error", "Overloaded"},
		{`{"error":{"code":429,"message":"Quota","status":"RESOURCE_EXHAUSTED"}}`, "RESOURCE_EXHAUSTED", "Quota"},
		{`{"error":"model \"llama9\" not found"}`, "", `model "llama9" not found`},
		{`{"message":"upstream failed"}`, "", "upstream failed"},
		{"<html>\n<body>502 Bad Gateway</body>\n</html>", "", "<html> <body>502 Bad Gateway</body> </html>"},
		{"", "", ""},
	}
	for _, tt := range tests {
		typ, msg := errorMessage([]byte(tt.body))
		if typ != tt.typ || msg != tt.msg {
			t.Errorf("errorMessage(%q) = %q, %q; want %q, %q", tt.body, typ, msg, tt.typ, tt.msg)
		}
	}
	long := strings.Repeat("é", 400)
	if _, msg := errorMessage([]byte(long)); len(msg) > 304 || !strings.HasSuffix(msg, "…") {
		t.Errorf("long body not clipped: %d bytes", len(msg))
	}
}
