package api_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// TestSetTokensRotates swaps the token set on a running server: the old
// value gets 401 at once, the new one 200, a token in both sets keeps
// working, an event stream opened with the removed token ends while one
// opened with a kept token stays, and a bad set changes nothing.
func TestSetTokensRotates(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	const newRead = "read-secret-rotated-1b77"
	w.wantStatus(w.call(http.MethodGet, "/v1/agents", readToken, "", ""), http.StatusOK)
	revoked := w.openStream("/v1/events", nil) // with readToken
	kept := w.openStream("/v1/events", map[string]string{"Authorization": "Bearer " + operateToken})

	if err := w.srv.SetTokens([]api.Token{
		{Name: "dashboard", Role: api.RoleRead, Value: newRead},
		{Name: "ops", Role: api.RoleOperate, Value: operateToken},
	}); err != nil {
		t.Fatal(err)
	}
	r := w.call(http.MethodGet, "/v1/agents", readToken, "", "")
	w.wantStatus(r, http.StatusUnauthorized)
	r.errorText(t)
	w.wantStatus(w.call(http.MethodGet, "/v1/agents", newRead, "", ""), http.StatusOK)
	w.wantStatus(w.post("/v1/agents/alpha/pause", ""), http.StatusOK)

	// The stream of the revoked token ends; the other carries on.
	timeout := time.After(deadline)
	for open := true; open; {
		select {
		case _, open = <-revoked.frames:
		case <-timeout:
			t.Fatal("the event stream of a revoked token is still open")
		}
	}
	for {
		if e := kept.next().eventData(t); e.Type == "paused" && e.Agent == "alpha" {
			break
		}
	}

	// A bad set is refused whole; the tokens in force stay.
	for _, bad := range [][]api.Token{
		{{Name: "dashboard", Role: api.RoleRead, Value: ""}},
		{{Name: "dashboard", Role: "admin", Value: "x"}},
		{{Name: "dashboard", Role: api.RoleRead, Value: "x", Agents: []string{"["}}},
	} {
		if err := w.srv.SetTokens(bad); !errors.Is(err, api.ErrBadToken) {
			t.Errorf("SetTokens(%+v): %v, want ErrBadToken", bad[0].Role, err)
		}
	}
	w.wantStatus(w.call(http.MethodGet, "/v1/agents", newRead, "", ""), http.StatusOK)

	// On loopback an empty set is allowed, and means open, as in New;
	// tokens can come back.
	if err := w.srv.SetTokens(nil); err != nil {
		t.Fatal(err)
	}
	w.wantStatus(w.call(http.MethodGet, "/v1/agents", "", "", ""), http.StatusOK)
	if err := w.srv.SetTokens(tokens); err != nil {
		t.Fatal(err)
	}
	w.wantStatus(w.call(http.MethodGet, "/v1/agents", "", "", ""), http.StatusUnauthorized)
	w.wantStatus(w.call(http.MethodGet, "/v1/agents", readToken, "", ""), http.StatusOK)
}

// TestSetTokensKeepsTheNoTokenRule: an empty set is refused beyond
// loopback, whether the server is configured for (Options.Listen) or
// actually listening on such an address; its tokens stay.
func TestSetTokensKeepsTheNoTokenRule(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	configured, err := api.New(api.Options{Listen: "0.0.0.0:8080", Driver: w.driver, Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	if err := configured.SetTokens(nil); !errors.Is(err, api.ErrNoToken) {
		t.Fatalf("SetTokens(nil) for 0.0.0.0:8080: %v", err)
	}

	// Configured for loopback, but served on every interface.
	s, err := api.New(api.Options{Driver: w.driver, Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	t.Cleanup(func() {
		_ = s.Shutdown(context.Background())
		<-served
	})
	wait.For(t, "serving", func() bool { return s.Addr() != "" })
	if err := s.SetTokens([]api.Token{}); !errors.Is(err, api.ErrNoToken) {
		t.Fatalf("SetTokens(empty) while serving on %s: %v", s.Addr(), err)
	}
	_, port, _ := net.SplitHostPort(s.Addr())
	resp, err := http.Get("http://127.0.0.1:" + port + "/v1/agents")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("after a refused SetTokens, a request without a token got %d", resp.StatusCode)
	}
}

// TestSetTokensIsAtomicUnderLoad swaps sets over and over while requests
// run: a token in every set is never refused, and the race detector sees
// no unsynchronised access.
func TestSetTokensIsAtomicUnderLoad(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	setA := []api.Token{{Name: "ops", Role: api.RoleOperate, Value: operateToken}, {Name: "a", Role: api.RoleRead, Value: "token-a"}}
	setB := []api.Token{{Name: "b", Role: api.RoleRead, Value: "token-b"}, {Name: "ops", Role: api.RoleOperate, Value: operateToken}}

	var stop atomic.Bool
	var refused atomic.Int64
	var requests atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				req, _ := http.NewRequest(http.MethodGet, w.ts.URL+"/v1/agents/alpha", nil)
				req.Header.Set("Authorization", "Bearer "+operateToken)
				resp, err := w.ts.Client().Do(req)
				if err != nil {
					refused.Add(1)
					continue
				}
				resp.Body.Close()
				requests.Add(1)
				if resp.StatusCode != http.StatusOK {
					refused.Add(1)
				}
			}
		})
	}
	// Swap until enough requests have run during the swaps.
	end := time.Now().Add(deadline)
	swaps := 0
	for ; requests.Load() < 300 || swaps < 300; swaps++ {
		if time.Now().After(end) {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("only %d requests in %d swaps", requests.Load(), swaps)
		}
		set := setA
		if swaps%2 == 1 {
			set = setB
		}
		if err := w.srv.SetTokens(set); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if n := refused.Load(); n != 0 {
		t.Fatalf("%d of %d requests with a token present in every set were refused", n, requests.Load())
	}
}
