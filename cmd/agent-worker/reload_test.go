package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// reloadDeadline bounds every wait of the reload tests; the waits poll
// and return as soon as what they wait for happens.
const reloadDeadline = 20 * time.Second

// rotate replaces a token file the way an operator should: a complete new
// file renamed into place.
func rotate(t *testing.T, path, value string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// call sends one request to the operator API and returns the status and
// body.
func call(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), reloadDeadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

func wantCall(t *testing.T, method, url, token, body string, want int) string {
	t.Helper()
	got, data := call(t, method, url, token, body)
	if got != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, url, got, want, data)
	}
	return data
}

// apiURL waits for the banner's operator API URL; stopped is closed when
// the worker has returned (it then never prints one).
func apiURL(t *testing.T, out, errb *syncBuffer, stopped <-chan struct{}) string {
	t.Helper()
	end := time.Now().Add(reloadDeadline)
	for {
		for _, line := range strings.Split(out.String(), "\n") {
			if rest, ok := strings.CutPrefix(line, "operator API:    "); ok {
				u, _, _ := strings.Cut(rest, " ")
				return u
			}
		}
		select {
		case <-stopped:
			t.Fatalf("the worker stopped before it served:\n%s\n%s", out.String(), errb.String())
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(end) {
			t.Fatalf("no API URL in the banner:\n%s\n%s", out.String(), errb.String())
		}
	}
}

// runningWorker is `agent-worker args...` run in the test until stop.
type runningWorker struct {
	out, errb syncBuffer
	url       string // the operator API, from the banner
	code      int
	stopped   chan struct{}
	cancel    context.CancelFunc
}

// runWorker runs execute with args and waits for its API URL.
func runWorker(t *testing.T, args ...string) *runningWorker {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := &runningWorker{code: exitOK, stopped: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(r.stopped)
		r.code = execute(ctx, args, &r.out, &r.errb)
	}()
	// The banner comes after run installed its signal handling.
	r.url = apiURL(t, &r.out, &r.errb, r.stopped)
	return r
}

// stop cancels the run and checks it exits 0 within reloadDeadline.
func (r *runningWorker) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case <-r.stopped:
		if r.code != exitOK {
			t.Fatalf("exit %d:\n%s", r.code, r.errb.String())
		}
	case <-time.After(reloadDeadline):
		t.Fatal("run did not stop after cancellation")
	}
}

// waitLog waits until the log holds want n times.
func waitLog(t *testing.T, errb *syncBuffer, want string, n int) {
	t.Helper()
	end := time.Now().Add(reloadDeadline)
	for strings.Count(errb.String(), want) < n {
		if time.Now().After(end) {
			t.Fatalf("the log holds %q %d times, want %d:\n%s", want, strings.Count(errb.String(), want), n, errb.String())
		}
		<-time.After(5 * time.Millisecond)
	}
}

// TestSIGHUPReloadsTheAPITokens is the operator's rotation: `run` with a
// token in a value_file, the file replaced, a real SIGHUP sent to the
// process (this test process: run's signal handling must catch it, or the
// test binary dies of it). The old token then gets 401, the new one 200,
// and the worker keeps serving until it is stopped as usual.
func TestSIGHUPReloadsTheAPITokens(t *testing.T) { // not parallel: it signals the whole test process
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "ops.token")
	const oldToken, newToken = "old-operate-token-5a1c", "new-operate-token-9e04"
	rotate(t, tokenFile, oldToken)
	p := writeFile(t, `data_dir: `+dir+`
nats: {listen: "-1"}
api: {listen: "127.0.0.1:0", tokens: [{name: ops, role: operate, value_file: `+tokenFile+`}]}
models:
  f: {provider: scripted, behaviour: demo}
agents: [{name: ops, model: f}]
`)
	w := runWorker(t, "run", "--config", p)
	url, out, errb := w.url, &w.out, &w.errb
	wantCall(t, "GET", url+"/v1/agents", oldToken, "", http.StatusOK)
	wantCall(t, "GET", url+"/v1/agents", newToken, "", http.StatusUnauthorized)

	rotate(t, tokenFile, newToken)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, errb, `msg="api tokens reloaded" signal=hangup tokens=1`, 1)

	wantCall(t, "GET", url+"/v1/agents", oldToken, "", http.StatusUnauthorized)
	if body := wantCall(t, "GET", url+"/v1/agents", newToken, "", http.StatusOK); !strings.Contains(body, `"name":"ops"`) {
		t.Fatalf("agents after the reload: %s", body)
	}
	wantCall(t, "POST", url+"/v1/agents/ops/pause", newToken, "", http.StatusOK)
	wantCall(t, "GET", url+"/healthz", "", "", http.StatusOK)
	for _, v := range []string{oldToken, newToken} {
		if strings.Contains(errb.String(), v) || strings.Contains(out.String(), v) {
			t.Fatalf("a token value was printed:\n%s\n%s", out.String(), errb.String())
		}
	}

	w.stop(t)
}

// TestReloadKeepsTheOldTokensOnError drives serveReloading's reload
// channel directly: a reload swaps the values of every token (roles and
// agents as configured: the ingest token may only queue for its agent);
// a reload that fails — a value file left empty — is logged with the
// error and leaves the tokens in force; a later good one applies.
func TestReloadKeepsTheOldTokensOnError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opsFile, amFile := filepath.Join(dir, "ops.token"), filepath.Join(dir, "am.token")
	rotate(t, opsFile, "ops-1")
	rotate(t, amFile, "am-1")
	cfg, err := loadConfig(writeFile(t, `data_dir: `+dir+`
nats: {listen: "-1"}
api:
  listen: "127.0.0.1:0"
  tokens:
    - {name: ops, role: operate, value_file: `+opsFile+`}
    - {name: am, role: ingest, value_file: `+amFile+`, agents: [pay-*]}
models:
  f: {provider: scripted, behaviour: demo}
agents: [{name: pay-api, model: f}, {name: web, model: f}]
`), processEnviron())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	reload := make(chan os.Signal, 1) // as signal.Notify's: a send never blocks the test
	var out, errb syncBuffer
	var serveErr error
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		serveErr = serveReloading(ctx, nil, reload, cfg, &out, &errb)
	}()
	t.Cleanup(func() {
		cancel()
		<-stopped
		if serveErr != nil {
			t.Error(serveErr)
		}
	})
	url := apiURL(t, &out, &errb, stopped)
	msg := `{"text": "disk full", "wake": false}`
	wantCall(t, "POST", url+"/v1/agents/pay-api/messages", "am-1", msg, http.StatusAccepted)

	rotate(t, opsFile, "ops-2")
	rotate(t, amFile, "am-2")
	reload <- syscall.SIGHUP
	waitLog(t, &errb, `msg="api tokens reloaded" signal=hangup tokens=2`, 1)
	wantCall(t, "GET", url+"/v1/agents", "ops-1", "", http.StatusUnauthorized)
	wantCall(t, "GET", url+"/v1/agents", "ops-2", "", http.StatusOK)
	wantCall(t, "POST", url+"/v1/agents/pay-api/messages", "am-1", msg, http.StatusUnauthorized)
	wantCall(t, "POST", url+"/v1/agents/pay-api/messages", "am-2", msg, http.StatusAccepted)
	// The role and the agents hold after the reload.
	wantCall(t, "POST", url+"/v1/agents/web/messages", "am-2", msg, http.StatusForbidden)
	wantCall(t, "GET", url+"/v1/agents", "am-2", "", http.StatusForbidden)

	// A file caught empty: the reload fails, and says so; the tokens in
	// force stay, the other file's new value included (the set is
	// swapped whole or not at all).
	rotate(t, opsFile, "ops-3")
	rotate(t, amFile, "")
	reload <- syscall.SIGHUP
	waitLog(t, &errb, `msg="api tokens not reloaded; the old tokens stay in force" signal=hangup error=`, 1)
	if !strings.Contains(errb.String(), "has no value") {
		t.Fatalf("the reload error does not say what is wrong:\n%s", errb.String())
	}
	wantCall(t, "GET", url+"/v1/agents", "ops-2", "", http.StatusOK)
	wantCall(t, "GET", url+"/v1/agents", "ops-3", "", http.StatusUnauthorized)
	wantCall(t, "POST", url+"/v1/agents/pay-api/messages", "am-2", msg, http.StatusAccepted)

	rotate(t, amFile, "am-3")
	reload <- syscall.SIGHUP
	waitLog(t, &errb, `msg="api tokens reloaded"`, 2)
	wantCall(t, "GET", url+"/v1/agents", "ops-3", "", http.StatusOK)
	wantCall(t, "POST", url+"/v1/agents/pay-api/messages", "am-3", msg, http.StatusAccepted)
	for _, v := range []string{"ops-1", "ops-2", "ops-3", "am-1", "am-2", "am-3"} {
		if strings.Contains(errb.String(), v) {
			t.Fatalf("token value %q was logged:\n%s", v, errb.String())
		}
	}
}

// TestSIGHUPReloadsTheConfigFile is a reload as an operator does it: the
// config file replaced, then a real SIGHUP. An added agent appears in the
// API and takes messages; the --api-listen override still holds (a
// reload does not read the listen address from the file: it would need a
// restart); a broken file is refused with its file:line in the log and
// the running config kept; then POST /v1/reload with an operate token
// applies a good file again.
func TestSIGHUPReloadsTheConfigFile(t *testing.T) { // not parallel: it signals the whole test process
	dir := t.TempDir()
	t.Setenv("AW_RELOAD_OPS_TOKEN", "reload-ops-5d1e")
	head := `data_dir: ` + dir + `
nats: {listen: "-1"}
api: {tokens: [{name: ops, role: operate, value_env: AW_RELOAD_OPS_TOKEN}]}
models:
  f: {provider: scripted, behaviour: demo}
agents:
  - {name: ops, model: f}
`
	p := writeFile(t, head)
	replace := func(body string) {
		t.Helper()
		if err := os.WriteFile(p+".new", []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p+".new", p); err != nil {
			t.Fatal(err)
		}
	}
	w := runWorker(t, "run", "--config", p, "--api-listen", "127.0.0.1:0")
	url, errb := w.url, &w.errb
	const token = "reload-ops-5d1e"

	replace(head + "  - {name: added, model: f}\n")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, errb, `msg="config reloaded" by="signal SIGHUP" outcome=applied`, 1)
	if !strings.Contains(errb.String(), "added=[added]") {
		t.Fatalf("the log does not say which agent was added:\n%s", errb.String())
	}
	if body := wantCall(t, "GET", url+"/v1/agents", token, "", http.StatusOK); !strings.Contains(body, `"name":"added"`) {
		t.Fatalf("agents after the reload: %s", body)
	}
	wantCall(t, "POST", url+"/v1/agents/added/messages", token, `{"text": "hello"}`, http.StatusAccepted)

	replace(head + "  - {name: broken, model: nosuch}\n")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, errb, `msg="config not reloaded; the running config stays in force"`, 1)
	if !strings.Contains(errb.String(), filepath.Base(p)+":8:") {
		t.Fatalf("the refusal does not name the file and line:\n%s", errb.String())
	}
	body := wantCall(t, "GET", url+"/v1/agents", token, "", http.StatusOK)
	if !strings.Contains(body, `"name":"added"`) || strings.Contains(body, `"name":"broken"`) {
		t.Fatalf("a refused reload changed the agents: %s", body)
	}
	if got := wantCall(t, "POST", url+"/v1/reload", token, "", http.StatusUnprocessableEntity); !strings.Contains(got, filepath.Base(p)+":8:") {
		t.Fatalf("POST /v1/reload of the broken file: %s", got)
	}

	replace(head)
	if got := wantCall(t, "POST", url+"/v1/reload", token, "", http.StatusOK); !strings.Contains(got, `"removed":["added"]`) {
		t.Fatalf("POST /v1/reload: %s", got)
	}
	if body := wantCall(t, "GET", url+"/v1/agents", token, "", http.StatusOK); strings.Contains(body, `"name":"added"`) {
		t.Fatalf("the removed agent is still listed: %s", body)
	}

	w.stop(t)
}
