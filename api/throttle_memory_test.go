package api

import (
	"fmt"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/clock"
)

// TestThrottleMemoryIsBounded: the throttle remembers at most its bound
// of client addresses — beyond it, the one refused longest ago is
// forgotten, its count with it — and forgets each client once its window
// is over and its lines are written, so a sender of many addresses
// costs bounded memory and a quiet table empties.
func TestThrottleMemoryIsBounded(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	th := newAuthThrottle(c, slog.New(slog.DiscardHandler))
	th.max = 3
	for range AuthFailureLimit {
		th.refused("10.0.0.1", refusedCredential, "/v1/agents", "invalid bearer token", "api request with an invalid token")
	}
	if th.wait("10.0.0.1", "/v1/agents") <= 0 {
		t.Fatal("10.0.0.1 is not throttled after the limit of failures")
	}
	for i := 2; i <= 100; i++ {
		th.refused(fmt.Sprintf("10.0.0.%d", i), refusedCredential, "/", "invalid bearer token", "api request with an invalid token")
		if n := th.size(); n > 3 {
			t.Fatalf("%d clients remembered, bound 3", n)
		}
	}
	if th.wait("10.0.0.1", "/v1/agents") != 0 {
		t.Fatal("the client refused longest ago is still remembered in a full table")
	}

	// Without a bound hit: everyone is forgotten once the window is over.
	th = newAuthThrottle(c, slog.New(slog.DiscardHandler))
	for i := range 500 {
		th.refused(fmt.Sprintf("10.1.%d.%d", i/256, i%256), refusedCredential, "/", "invalid bearer token", "api request with an invalid token")
		th.refused(fmt.Sprintf("10.2.%d.%d", i/256, i%256), refusedMissing, "/", "no credential", "api request without a token")
	}
	if n := th.size(); n != 1000 {
		t.Fatalf("%d clients remembered, want 1000", n)
	}
	c.Advance(AuthFailureWindow)
	if n := th.size(); n != 0 {
		t.Fatalf("%d clients still remembered a quiet window later", n)
	}
	// A throttled client is remembered while it goes on, then forgotten.
	for range AuthFailureLimit + 5 {
		th.refused("10.9.9.9", refusedCredential, "/", "invalid bearer token", "api request with an invalid token")
	}
	c.Advance(AuthFailureWindow) // a summary of 14 more failures
	c.Advance(AuthFailureWindow) // quiet: forgotten
	if n := th.size(); n != 0 {
		t.Fatalf("%d clients still remembered after two quiet windows", n)
	}
}

// TestClientOfIsTheConnectionsAddress: refusals are counted under the
// connection's IP — an IPv6 one by its /64 — never under a header the
// client writes.
func TestClientOfIsTheConnectionsAddress(t *testing.T) {
	t.Parallel()
	for remote, want := range map[string]string{
		"10.1.2.3:4444":             "10.1.2.3",
		"[2001:db8:1:2:3::4]:5555":  "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::]:443": "2001:db8:1:2::/64",
		"[::ffff:10.1.2.3]:80":      "10.1.2.3",
		"@":                         "@", // not host:port (a unix socket)
	} {
		r := httptest.NewRequest("GET", "/v1/agents", nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-For", "192.0.2.7")
		r.Header.Set("X-Real-IP", "192.0.2.8")
		if got := clientOf(r); got != want {
			t.Errorf("clientOf(%q) = %q, want %q", remote, got, want)
		}
	}
}
