package main

import (
	"errors"
	"testing"
)

// TestNotPausedTakesOnlyTheResumeRefusal: a resume asked again after its
// answer was lost counts as taken on the API's 409 "not paused", and on
// no other refusal.
func TestNotPausedTakesOnlyTheResumeRefusal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  string
		want bool
	}{
		{`POST /v1/agents/a1/resume: HTTP 409: {"ok":false,"state":"sleeping","error":"agent \"a1\" is not paused (state sleeping): nothing to resume; use wake to run a turn","code":409}`, true},
		{`POST /v1/agents/a1/resume: HTTP 409: {"error":"agent \"a1\" is halted by daily_usd (spent): resume runs no turn until the guardrail is reset"}`, false},
		{`POST /v1/agents/a1/resume: HTTP 503: {"error":"no replica answered for agent \"a1\""}`, false},
		{`dial tcp 127.0.0.1:8080: connect: connection refused`, false},
	} {
		if got := notPaused(errors.New(tc.err)); got != tc.want {
			t.Errorf("notPaused(%s) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
