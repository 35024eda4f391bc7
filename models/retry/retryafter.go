package retry

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryAfter reads how long a response asks the client to wait: the
// "retry-after-ms" header (milliseconds, sent by OpenAI and Anthropic) when
// present, else "Retry-After" as delay-seconds or an HTTP-date relative to
// now. It returns 0 when neither is present or parseable, or the date has
// passed.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && !math.IsInf(ms, 0) {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	return ParseRetryAfter(h.Get("Retry-After"), now)
}

// ParseRetryAfter parses a Retry-After value: delay-seconds ("2", and
// leniently "1.5") or an HTTP-date ("Wed, 21 Oct 2015 07:28:00 GMT")
// relative to now. It returns 0 for an empty, malformed, negative or past
// value.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs <= 0 || math.IsInf(secs, 0) || math.IsNaN(secs) || secs > math.MaxInt64/float64(time.Second) {
			return 0
		}
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}
