package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestHealthReadyWorker: against a running worker, `health --api URL` (as
// the HEALTHCHECK and the Helm test run it) prints "ready" and exits 0
// once the worker is ready.
func TestHealthReadyWorker(t *testing.T) {
	t.Parallel()
	url := startServe(t, `data_dir: `+t.TempDir()+`
nats: {listen: "-1"}
api: {listen: "127.0.0.1:0"}
models:
  f: {provider: scripted, behaviour: demo}
agents: [{name: a, model: f}]
`)
	var out, errs string
	var code int
	eventually(t, func() bool {
		out, errs, code = run(testEnv(nil), "health", "--api", url)
		return code == exitOK
	}, func() string { return out + errs }, "health never exited 0")
	if out != "ready\n" || errs != "" {
		t.Fatalf("stdout %q, stderr %q", out, errs)
	}
}

// TestHealthNotReady: a 503 from /readyz prints the reasons and exits 1.
func TestHealthNotReady(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status": "not ready", "reasons": ["nats: connection closed", "store: redis at db:6379 unreachable"]}`))
	}))
	t.Cleanup(srv.Close)
	out, errs, code := run(testEnv(nil), "health", "--api", srv.URL)
	if code != exitFailed {
		t.Fatalf("exit %d, want %d: %s%s", code, exitFailed, out, errs)
	}
	if want := "not ready: nats: connection closed; store: redis at db:6379 unreachable\n"; out != want {
		t.Fatalf("stdout %q, want %q", out, want)
	}
}

// TestHealthUnreachable: nothing listening is not ready either: exit 1,
// within the timeout, saying what failed.
func TestHealthUnreachable(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	out, errs, code := run(testEnv(nil), "health", "--api", "http://"+addr)
	if code != exitFailed || !strings.Contains(errs, "GET /readyz") || !strings.Contains(errs, addr) {
		t.Fatalf("exit %d\nstdout %q\nstderr %q", code, out, errs)
	}
}

// TestHealthTimesOut: a worker that accepts but never answers is not
// ready after --timeout.
func TestHealthTimesOut(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	start := time.Now()
	_, errs, code := run(testEnv(nil), "health", "--api", srv.URL, "--timeout", "100ms")
	if code != exitFailed || !strings.Contains(errs, "Timeout") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("took %v with --timeout 100ms", took)
	}
}

// TestHealthAPIFromEnv: without --api, AGENT_WORKER_API says where the
// worker is; the token, when given, is sent.
func TestHealthAPIFromEnv(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer read-token" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error": "missing or unknown token"}`))
			return
		}
		_, _ = w.Write([]byte(`{"status": "ready"}`))
	}))
	t.Cleanup(srv.Close)
	env := testEnv(map[string]string{envAPI: srv.URL, envToken: "read-token"})
	if out, errs, code := run(env, "health"); code != exitOK || out != "ready\n" {
		t.Fatalf("exit %d: %q %q", code, out, errs)
	}
	env = testEnv(map[string]string{envAPI: srv.URL})
	if _, errs, code := run(env, "health"); code != exitFailed || !strings.Contains(errs, "missing or unknown token (HTTP 401)") {
		t.Fatalf("without the token: exit %d: %s", code, errs)
	}
}
