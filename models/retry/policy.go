package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"syscall"
	"time"

	"github.com/agent-worker/agent-worker/outage"
)

// Outcomes passed to Policy.OnAttempt, one per attempt made.
//
// OutcomeRetry and OutcomeRateLimited mark an attempt that failed and will be
// followed by another; OutcomeOK, OutcomeError and OutcomeCanceled end the
// call. A call therefore reports at most one ending outcome: none when ctx
// ends before an attempt or during a backoff wait (no attempt was in flight),
// otherwise exactly one.
const (
	OutcomeOK          = "ok"           // the attempt succeeded
	OutcomeRetry       = "retry"        // a 5xx, transport error or timeout that is retried
	OutcomeRateLimited = "rate_limited" // a 429 that is retried
	OutcomeError       = "error"        // a failure not retried: other 4xx, or retries exhausted
	OutcomeCanceled    = "canceled"     // the caller's context ended during the attempt
)

// Defaults applied to a zero Policy field.
const (
	DefaultMaxRetries = 3 // not applied by Do: MaxRetries 0 means no retries; for config defaults
	DefaultBase       = 500 * time.Millisecond
	DefaultMax        = 30 * time.Second
)

// Policy decides whether and when a failed request is sent again. The zero
// value makes one attempt and never retries; set MaxRetries to retry.
//
// What is retried: a *StatusError with status 429 or 5xx, an error wrapping
// ErrTimeout (an attempt that ran out of its own time), and transport errors
// (*url.Error, net.Error, connection resets, unexpected EOF). Everything else,
// including other 4xx and errors wrapped with Permanent, fails at once.
// Cancellation of the caller's context is never retried and stops a backoff
// wait at once. An error that would have been retried but ran out of
// attempts is marked as an outage (package outage): the provider is down,
// the request is not at fault.
//
// A Policy is a value: copies are independent and Do is safe for concurrent
// use as long as Sleep, Rand, Log and OnAttempt are.
type Policy struct {
	// MaxRetries is how many times a failed attempt may be repeated, so a
	// call makes at most MaxRetries+1 attempts. 0 (or negative): no retries.
	MaxRetries int
	// Base is the backoff ceiling before the first retry; it doubles for
	// each later retry. 0 means DefaultBase.
	Base time.Duration
	// Max caps every wait: the doubled backoff ceiling and a server's
	// Retry-After alike. 0 means DefaultMax.
	Max time.Duration
	// Sleep waits d or until ctx is done, returning ctx's error in that
	// case. nil means a timer that honours ctx. Tests inject a recorder so
	// that no test sleeps.
	Sleep func(ctx context.Context, d time.Duration) error
	// Rand returns a number in [0, 1) that scales the backoff ceiling (full
	// jitter). nil means math/rand/v2.
	Rand func() float64
	// Log receives one warning per retry (status, attempt, wait, error) and
	// one when retries are exhausted. nil discards.
	Log *slog.Logger
	// OnAttempt, when set, is called once per attempt with its outcome (the
	// Outcome constants), after the attempt and before any wait.
	OnAttempt func(outcome string)
}

// Do calls op until it succeeds, fails in a way that is not retried, the
// attempts run out, or ctx is done. op receives ctx unchanged; a per-attempt
// timeout belongs inside op (see WithTimeout, which marks it ErrTimeout).
//
// The error returned is op's last error; when retries ran out it is wrapped
// with the number of attempts made. When ctx is done Do returns an error that
// wraps ctx.Err() (and context.Cause(ctx) when that differs), whether ctx
// ended during an attempt or during a wait.
func (p Policy) Do(ctx context.Context, op func(ctx context.Context) error) error {
	maxAttempts := max(p.MaxRetries, 0) + 1
	for attempt := 1; ; attempt++ {
		if ctx.Err() != nil {
			return canceled(ctx, nil)
		}
		err := op(ctx)
		if err == nil {
			p.report(OutcomeOK)
			return nil
		}
		if ctx.Err() != nil {
			p.report(OutcomeCanceled)
			return canceled(ctx, err)
		}
		var perm *permanentError
		if errors.As(err, &perm) {
			p.report(OutcomeError)
			return perm.err
		}
		status, retryAfter, retryable := classify(err)
		if !retryable {
			p.report(OutcomeError)
			return err
		}
		if attempt >= maxAttempts {
			// A 429, 5xx or transport failure is the provider's outage, not
			// the request's fault: marked so the turn is retried later
			// without counting against its messages.
			p.report(OutcomeError)
			if maxAttempts > 1 {
				p.logger().LogAttrs(ctx, slog.LevelWarn, "model request failed, retries exhausted",
					slog.Int("status", status), slog.Int("attempts", attempt), slog.String("error", err.Error()))
				return outage.Mark("model provider", fmt.Errorf("%w (gave up after %d attempts)", err, attempt))
			}
			return outage.Mark("model provider", err)
		}
		if status == 429 {
			p.report(OutcomeRateLimited)
		} else {
			p.report(OutcomeRetry)
		}
		wait := p.Backoff(attempt, retryAfter)
		p.logger().LogAttrs(ctx, slog.LevelWarn, "model request failed, retrying",
			slog.Int("status", status), slog.Int("attempt", attempt), slog.Int("max_attempts", maxAttempts),
			slog.Duration("wait", wait), slog.String("error", err.Error()))
		if err := p.sleep(ctx, wait); err != nil {
			if ctx.Err() != nil {
				return canceled(ctx, nil)
			}
			return err
		}
	}
}

// Backoff returns the wait after failed attempt number attempt (1-based).
// A positive retryAfter from the server is used as it is, capped at Max;
// otherwise the wait is drawn uniformly from [0, min(Max, Base·2^(attempt-1)))
// (full jitter).
func (p Policy) Backoff(attempt int, retryAfter time.Duration) time.Duration {
	capd := p.Max
	if capd <= 0 {
		capd = DefaultMax
	}
	if retryAfter > 0 {
		return min(retryAfter, capd)
	}
	base := p.Base
	if base <= 0 {
		base = DefaultBase
	}
	ceiling := base
	for i := 1; i < attempt && ceiling < capd; i++ {
		ceiling *= 2
	}
	ceiling = min(ceiling, capd)
	r := rand.Float64
	if p.Rand != nil {
		r = p.Rand
	}
	f := r()
	if f < 0 || f >= 1 {
		f = 0
	}
	return time.Duration(f * float64(ceiling))
}

func (p Policy) report(outcome string) {
	if p.OnAttempt != nil {
		p.OnAttempt(outcome)
	}
}

func (p Policy) logger() *slog.Logger {
	if p.Log != nil {
		return p.Log
	}
	return slog.New(slog.DiscardHandler)
}

func (p Policy) sleep(ctx context.Context, d time.Duration) error {
	if p.Sleep != nil {
		return p.Sleep(ctx, d)
	}
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// classify reports the HTTP status behind err (0 for none), the server's
// Retry-After, and whether err is worth another attempt.
func classify(err error) (status int, retryAfter time.Duration, retryable bool) {
	var se *StatusError
	if errors.As(err, &se) {
		return se.StatusCode, se.RetryAfter, se.StatusCode == 429 || se.StatusCode >= 500
	}
	if errors.Is(err, ErrTimeout) {
		return 0, 0, true
	}
	return 0, 0, isTransport(err)
}

// isTransport reports whether err is a failure to reach the server or to
// read its answer, as opposed to a bad request or a bad response.
func isTransport(err error) bool {
	if errors.Is(err, context.Canceled) {
		// An attempt canceled while the caller's context is live was
		// canceled on purpose by the provider, not by the network.
		return false
	}
	var ue *url.Error
	var ne net.Error
	switch {
	case errors.As(err, &ue), errors.As(err, &ne):
		return true
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE):
		return true
	}
	return false
}

// canceled returns the error for a call stopped by ctx: it wraps ctx.Err(),
// and context.Cause(ctx) when that is more specific. The last attempt's
// error, if any, is kept in the text for the operator but not wrapped, so
// errors.Is answers for the context alone.
func canceled(ctx context.Context, last error) error {
	ctxErr := ctx.Err()
	cause := context.Cause(ctx)
	var err error
	if cause != nil && cause != ctxErr {
		err = fmt.Errorf("%w: %w", ctxErr, cause)
	} else {
		err = ctxErr
	}
	if last != nil && !errors.Is(last, ctxErr) {
		return fmt.Errorf("%w (last attempt: %v)", err, last)
	}
	if last != nil {
		// The attempt's own error already says it was canceled; keep its
		// text (which names the provider) and make sure the cause is there.
		if cause != nil && cause != ctxErr && !errors.Is(last, cause) {
			return fmt.Errorf("%w (%w)", last, cause)
		}
		return last
	}
	return err
}
