package retry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// ErrTimeout is wrapped by the error of an attempt that ran out of its own
// time limit (see WithTimeout) while the caller's context was still live.
// Such attempts are retried.
var ErrTimeout = errors.New("request timed out")

// StatusError is a provider's answer with an HTTP error status. Its text is
// "<provider>: <status> <status text>[ (<type>)]: <message>" and carries no
// request details (no URL, no headers), so it is safe to log.
type StatusError struct {
	// Provider names the provider ("openai", "anthropic", "gemini").
	Provider string
	// StatusCode is the HTTP status, e.g. 429.
	StatusCode int
	// Type is the provider's error type or status, when it sent one
	// ("rate_limit_error", "RESOURCE_EXHAUSTED", "invalid_request_error").
	Type string
	// Message is the provider's own explanation, from the error body.
	Message string
	// RetryAfter is how long the server asked to wait (Retry-After,
	// retry-after-ms, or a provider's own field); 0 when it did not say.
	RetryAfter time.Duration
}

func (e *StatusError) Error() string {
	var b strings.Builder
	if e.Provider != "" {
		b.WriteString(e.Provider)
		b.WriteString(": ")
	}
	fmt.Fprintf(&b, "%d", e.StatusCode)
	if t := http.StatusText(e.StatusCode); t != "" {
		b.WriteString(" ")
		b.WriteString(t)
	}
	if e.Type != "" {
		fmt.Fprintf(&b, " (%s)", e.Type)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// Permanent marks err as not worth another attempt whatever it wraps; Do
// returns err itself (unwrapped from the mark). Use it for failures after a
// response was partly consumed, or for a response that arrived but could not
// be used.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// WithTimeout runs fn with ctx limited to d (no limit when d <= 0). When that
// limit, and not ctx, ended the attempt with an error, the error returned
// wraps ErrTimeout so that Do retries it.
func WithTimeout(ctx context.Context, d time.Duration, fn func(ctx context.Context) error) error {
	if d <= 0 {
		return fn(ctx)
	}
	actx, cancel := context.WithTimeoutCause(ctx, d, ErrTimeout)
	defer cancel()
	err := fn(actx)
	if err != nil && ctx.Err() == nil && context.Cause(actx) == ErrTimeout {
		return fmt.Errorf("%w after %s (%v)", ErrTimeout, d, err)
	}
	return err
}

// Redact returns err with every occurrence of each non-empty secret in its
// text replaced by "[redacted]". errors.Is and errors.As still see the
// errors err wraps. It returns err itself when no secret occurs in it.
func Redact(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := RedactString(msg, secrets...)
	if clean == msg {
		return err
	}
	return &redactedError{msg: clean, err: err}
}

// RedactString replaces every occurrence of each non-empty secret in s with
// "[redacted]".
func RedactString(s string, secrets ...string) string {
	for _, sec := range secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, "[redacted]")
		}
	}
	return s
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// Request runs one provider request under p: every attempt gets its own
// timeout (when > 0) and a recorder of the HTTP response it made, which
// op turns into a *StatusError when the server answered with an error.
// The returned error has the secrets removed.
func (p Policy) Request(ctx context.Context, timeout time.Duration, secrets []string, op func(ctx context.Context, seen func() (Response, bool)) error) error {
	err := p.Do(ctx, func(ctx context.Context) error {
		return WithTimeout(ctx, timeout, func(ctx context.Context) error {
			ctx, seen := Record(ctx)
			return op(ctx, seen)
		})
	})
	return Redact(err, secrets...)
}
