package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/driver"
)

// recordingAPI answers every POST with {"ok": true} (resume with
// drop_queued: "dropped": 2), GET .../inbox with a listing of two
// messages and GET /v1/agents/{name} with a paused agent, and records each
// request as "METHOD path body".
type recordingAPI struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []string
}

func newRecordingAPI(t *testing.T) *recordingAPI {
	t.Helper()
	a := &recordingAPI{}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.reqs = append(a.reqs, r.Method+" "+r.URL.Path+" "+string(body))
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		now := time.Now()
		switch {
		case r.Method == http.MethodPost && strings.Contains(string(body), `"drop_queued":true`):
			_, _ = w.Write([]byte(`{"ok": true, "agent": "oncall", "state": "sleeping", "owner": "worker-b", "dropped": 2}`))
		case r.Method == http.MethodPost:
			_, _ = w.Write([]byte(`{"ok": true, "agent": "oncall", "state": "paused", "owner": "worker-b"}`))
		case strings.HasSuffix(r.URL.Path, "/inbox"):
			_ = json.NewEncoder(w).Encode(control.Inbox{Agent: "oncall", Owner: "worker-b", Pending: 1, Deferred: 1, Cap: 256,
				Messages: []driver.QueuedMessage{
					{ID: "alert-7", Kind: "inbox", Source: "nats:alerts.db", SizeBytes: 812, Received: now.Add(-3 * time.Minute), AgeSeconds: 180},
					{ID: "note-1", Kind: "deferred", Source: "api", From: "pipeline", SizeBytes: 40, Received: now, AgeSeconds: 2, Attempts: 1},
				}})
		default:
			since := now.Add(-3*time.Minute - 5*time.Second)
			_ = json.NewEncoder(w).Encode(api.AgentView{Name: "oncall", State: "paused", Owner: "worker-b", Paused: true,
				PausedSince: &since, PausedBy: "alice", PauseReason: "db migration", Schedules: []api.ScheduleView{}})
		}
	}))
	t.Cleanup(a.srv.Close)
	return a
}

// last returns the newest request recorded.
func (a *recordingAPI) last() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.reqs) == 0 {
		return ""
	}
	return a.reqs[len(a.reqs)-1]
}

// TestAuditFlagsReachTheAPI: --reason goes into every verb's body (and
// the reset's), --drop-queued into resume's, and the answer's "dropped"
// is printed; without flags the bodies are as before. `inbox` lists the
// queued messages; `status AGENT` says who paused the agent, since when
// and why. On the old code --reason, --drop-queued and inbox were unknown
// (exit 2) and status said only "paused by an operator".
func TestAuditFlagsReachTheAPI(t *testing.T) {
	t.Parallel()
	a := newRecordingAPI(t)
	env := testEnv(map[string]string{envToken: "tok"})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"pause", "oncall", "--reason", "db migration"}, `POST /v1/agents/oncall/pause {"reason":"db migration"}`},
		{[]string{"pause", "oncall"}, `POST /v1/agents/oncall/pause `},
		{[]string{"resume", "oncall", "--drop-queued", "--reason", "stale alerts"}, `POST /v1/agents/oncall/resume {"drop_queued":true,"reason":"stale alerts"}`},
		{[]string{"resume", "oncall", "--message", "carry on"}, `POST /v1/agents/oncall/resume {"message":"carry on"}`},
		{[]string{"interrupt", "oncall", "--reason", "runaway"}, `POST /v1/agents/oncall/interrupt {"hold":true,"reason":"runaway"}`},
		{[]string{"wake", "oncall", "--reason", "check now"}, `POST /v1/agents/oncall/wake {"reason":"check now"}`},
		{[]string{"reset", "oncall", "session_usd", "--add-budget", "2", "--reason", "incident 42"},
			`POST /v1/agents/oncall/guardrails/reset {"add_budget_usd":2,"guardrail":"session_usd","reason":"incident 42"}`},
	} {
		out, errs, code := run(env, append(c.args, "--api", a.srv.URL)...)
		if code != exitOK {
			t.Fatalf("%v: exit %d: %s", c.args, code, errs)
		}
		if got := a.last(); got != c.want {
			t.Fatalf("%v sent\n%s\nwant\n%s", c.args, got, c.want)
		}
		if c.args[0] == "resume" && strings.Contains(c.want, "drop_queued") && !strings.Contains(out, "2 queued message(s) dropped") {
			t.Fatalf("resume --drop-queued printed:\n%s", out)
		}
	}

	out, errs, code := run(env, "inbox", "oncall", "--api", a.srv.URL)
	if code != exitOK {
		t.Fatalf("inbox: exit %d: %s", code, errs)
	}
	if a.last() != "GET /v1/agents/oncall/inbox " {
		t.Fatalf("inbox sent %s", a.last())
	}
	wantLines(t, out, "oncall on worker-b: 1 pending of 256, 1 deferred")
	rows := fields(out)
	want := [][]string{
		{"ID", "KIND", "SOURCE", "FROM", "BYTES", "AGE", "ATTEMPTS"},
		{"alert-7", "inbox", "nats:alerts.db", "-", "812", "3m", "0"},
		{"note-1", "deferred", "api", "pipeline", "40", "2s", "1"},
	}
	if len(rows) != 4 || strings.Join(rows[1], "|") != strings.Join(want[0], "|") || strings.Join(rows[2], "|") != strings.Join(want[1], "|") ||
		strings.Join(rows[3], "|") != strings.Join(want[2], "|") {
		t.Fatalf("inbox table:\n%s", out)
	}
	if out, _, code := run(env, "inbox", "oncall", "-o", "json", "--api", a.srv.URL); code != exitOK || !strings.Contains(out, `"id": "alert-7"`) {
		t.Fatalf("inbox -o json: exit %d\n%s", code, out)
	}
	if _, _, code := run(env, "inbox", "oncall", "-o", "wide", "--api", a.srv.URL); code != exitConfig {
		t.Fatalf("inbox -o wide: exit %d, want %d", code, exitConfig)
	}

	out, errs, code = run(env, "status", "oncall", "--api", a.srv.URL)
	if code != exitOK {
		t.Fatalf("status: exit %d: %s", code, errs)
	}
	wantLines(t, out, "why:         paused by alice 3m ago (", "): db migration; messages stay queued until resume")
}

// TestTokenReloadIsAnAuditedEvent: a SIGHUP's token reload publishes a
// config-reloaded event for each agent, saying who asked (the signal),
// what was reloaded and the outcome, at the time it happened, and the log
// line names the signal as who. On the old code a reload was only a log
// line.
func TestTokenReloadIsAnAuditedEvent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opsFile := filepath.Join(dir, "ops.token")
	rotate(t, opsFile, "ops-1")
	cfg, err := loadConfig(writeFile(t, `data_dir: `+dir+`
nats: {listen: "-1"}
api:
  listen: "127.0.0.1:0"
  tokens: [{name: ops, role: operate, value_file: `+opsFile+`}]
models:
  f: {provider: scripted, behaviour: demo}
agents: [{name: a, model: f}]
`), processEnviron())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	reload := make(chan os.Signal, 1)
	var out, errb syncBuffer
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = serveReloading(ctx, nil, reload, cfg, &out, &errb)
	}()
	t.Cleanup(func() { cancel(); <-stopped })
	url := apiURL(t, &out, &errb, stopped)

	streamCtx, stop := context.WithTimeout(context.Background(), reloadDeadline)
	defer stop()
	req, _ := http.NewRequestWithContext(streamCtx, http.MethodGet, url+"/v1/agents/a/events", nil)
	req.Header.Set("Authorization", "Bearer ops-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("event stream: %v %v", resp, err)
	}
	defer resp.Body.Close()
	lines := make(chan string, 1000)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()

	before := time.Now()
	reload <- syscall.SIGHUP // the same token value: the stream stays open
	waitLog(t, &errb, `msg="api tokens reloaded" signal=hangup tokens=1 by="signal SIGHUP"`, 1)
	for found := false; !found; {
		line, ok := <-lines
		if !ok {
			t.Fatalf("the stream ended without a config-reloaded event:\n%s", errb.String())
		}
		if line != "event: config-reloaded" {
			continue
		}
		data := strings.TrimPrefix(<-lines, "data: ")
		var e struct {
			Time  time.Time      `json:"time"`
			Agent string         `json:"agent"`
			Data  map[string]any `json:"data"`
		}
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			t.Fatalf("config-reloaded data %q: %v", data, err)
		}
		if e.Agent != "a" || e.Data["by"] != "signal SIGHUP" || e.Data["what"] != "config" || e.Data["ok"] != true ||
			e.Data["tokens"] != 1.0 || e.Time.Before(before.Add(-time.Second)) {
			t.Fatalf("config-reloaded event %s", data)
		}
		found = true
	}
}
