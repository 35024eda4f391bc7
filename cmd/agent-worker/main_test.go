package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer the worker's goroutines may write while the
// test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const broken = `models:
  fake: {provider: scripted, script: [{text: hi}]}
agents:
  - name: oncall
    model: fake
    schedules: [{name: tick, cron: "*/61 * * * *"}]
  - name: oncall
    model: fake
    colour: blue
`

func TestValidateAndRunRejectBrokenConfig(t *testing.T) {
	t.Parallel()
	p := writeFile(t, broken)
	for _, verb := range []string{"validate", "run"} {
		t.Run(verb, func(t *testing.T) {
			var out, errb syncBuffer
			code := execute(context.Background(), []string{verb, "--config", p}, &out, &errb)
			if code != exitConfig {
				t.Fatalf("exit code %d, want %d; stderr:\n%s", code, exitConfig, errb.String())
			}
			for _, want := range []string{
				p + `:6: agents[0].schedules[0].cron: bad cron "*/61 * * * *"`,
				p + `:7: agents[1].name: duplicate agent name "oncall"`,
				p + `:9: agents[1]: unknown key "colour"`,
			} {
				if !strings.Contains(errb.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, errb.String())
				}
			}
		})
	}
}

func TestValidateAcceptsExample(t *testing.T) {
	t.Parallel()
	var out, errb syncBuffer
	if code := execute(context.Background(), []string{"validate", "--config", "../../config.example.yaml"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "ok (") {
		t.Fatalf("stdout: %q", out.String())
	}
}

// An environment value is one scalar: validate loads the agent as written,
// not an extra agent smuggled in through an instruction.
func TestValidateTakesAnEnvValueAsOneValue(t *testing.T) { // not parallel: Load reads the process environment
	t.Setenv("ALERT_NOTE", `x"}, {name: b, model: fake, tools: [http_get], http_get: ["http://127.0.0.1/"], http_get_allow_private: true}] #`)
	p := writeFile(t, `models:
  fake: {provider: scripted, behaviour: demo}
agents: [{name: a, model: fake, instruction: "${ALERT_NOTE}"}]
`)
	var out, errb syncBuffer
	if code := execute(context.Background(), []string{"validate", "--config", p}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if want := p + ": ok (1 agent(s), 1 model(s))\n"; out.String() != want {
		t.Fatalf("stdout %q, want %q", out.String(), want)
	}
}

func TestValidateNeedsConfig(t *testing.T) {
	t.Parallel()
	var out, errb syncBuffer
	if code := execute(context.Background(), []string{"validate"}, &out, &errb); code != exitConfig {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(errb.String(), "--config") {
		t.Fatalf("stderr: %q", errb.String())
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	var out, errb syncBuffer
	if code := execute(context.Background(), []string{"version"}, &out, &errb); code != exitOK || !strings.HasPrefix(out.String(), "agent-worker dev (go") {
		t.Fatalf("exit %d, out %q", code, out.String())
	}
}

// TestRunEmbeddedDefault is `make run`: with no config the demo agent runs
// a turn on its own, and cancellation (SIGINT) shuts the worker down
// cleanly with exit 0.
func TestRunEmbeddedDefault(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan int)
	args := []string{"run", "--data-dir", t.TempDir(), "--nats-listen", "-1", "--api-listen", "127.0.0.1:0"}
	go func() { done <- execute(ctx, args, &out, &errb) }()
	end := time.Now().Add(20 * time.Second)
	for !strings.Contains(errb.String(), `msg="turn completed" agent=demo turn=1`) {
		if time.Now().After(end) {
			cancel()
			t.Fatalf("no demo turn in the log:\n%s", errb.String())
		}
		<-time.After(5 * time.Millisecond)
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("exit %d:\n%s", code, errb.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run did not stop after cancellation")
	}
	for _, want := range []string{"running 1 agent(s) [demo]", "NATS (embedded): nats://127.0.0.1:", "agent-worker send demo"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("banner lacks %q: %q", want, out.String())
		}
	}
	for _, want := range []string{"clamped", `msg="worker stopped"`} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, errb.String())
		}
	}
}

func TestRunReportsAnUnreachableStore(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	p := writeFile(t, "store: {url: \"redis://:hunter2@"+addr+"/0\"}\nmodels:\n  f: {provider: scripted, behaviour: demo}\nagents: [{name: a, model: f}]\n")
	var out, errb syncBuffer
	args := []string{"run", "--config", p, "--data-dir", t.TempDir(), "--nats-listen", "-1", "--api-listen", "127.0.0.1:0"}
	if code := execute(context.Background(), args, &out, &errb); code != exitUnreachable {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(errb.String(), "redis at "+addr) || strings.Contains(errb.String(), "hunter2") {
		t.Fatalf("stderr should name the address and hide the password: %s", errb.String())
	}
}

// TestSendReachesTheAgent runs a worker and uses `agent-worker send`, as a
// user would from another terminal. A repeated --id is the stream's
// duplicate for the same agent only.
func TestSendReachesTheAgent(t *testing.T) {
	t.Parallel()
	p := writeFile(t, `data_dir: `+t.TempDir()+`
nats: {listen: "-1"}
api: {listen: "127.0.0.1:0"}
models:
  f: {provider: scripted, behaviour: demo}
agents: [{name: ops, model: f, tools: [schedule_next_turn]}, {name: dev, model: f, tools: [schedule_next_turn]}]
`)
	cfg, err := loadConfig(p, processEnviron())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan error)
	go func() { done <- serve(ctx, nil, cfg, &out, &errb) }()
	defer func() { cancel(); <-done }()
	end := time.Now().Add(20 * time.Second)
	var url string
	for url == "" {
		if time.Now().After(end) {
			t.Fatalf("no NATS URL in the banner:\n%s\n%s", out.String(), errb.String())
		}
		for _, line := range strings.Split(out.String(), "\n") {
			if rest, ok := strings.CutPrefix(line, "NATS (embedded): "); ok {
				url, _, _ = strings.Cut(rest, " ")
			}
		}
		<-time.After(5 * time.Millisecond)
	}
	var sout, serr syncBuffer
	if code := execute(context.Background(), []string{"send", "ops", "disk full on db-1", "--nats", url, "--id", "m-1"}, &sout, &serr); code != exitOK {
		t.Fatalf("send exit %d: %s", code, serr.String())
	}
	if !strings.Contains(sout.String(), "sent to agents.ops.inbox: stream AGENTS seq 1") {
		t.Fatalf("send printed %q", sout.String())
	}
	for !strings.Contains(errb.String(), `Received 1 message(s): \"disk full on db-1\"`) {
		if time.Now().After(end) {
			t.Fatalf("the agent never saw the message:\n%s", errb.String())
		}
		<-time.After(5 * time.Millisecond)
	}
	var dout, derr syncBuffer
	execute(context.Background(), []string{"send", "ops", "disk full on db-1", "--nats", url, "--id", "m-1"}, &dout, &derr)
	if !strings.Contains(dout.String(), "duplicate id") {
		t.Fatalf("resend with the same id: %q", dout.String())
	}
	// Ids are per agent: the same id to another agent is its message.
	var oout, oerr syncBuffer
	execute(context.Background(), []string{"send", "dev", "disk full on db-1", "--nats", url, "--id", "m-1"}, &oout, &oerr)
	if !strings.Contains(oout.String(), "sent to agents.dev.inbox: stream AGENTS seq 2") || strings.Contains(oout.String(), "duplicate") {
		t.Fatalf("the same id to another agent: %q %s", oout.String(), oerr.String())
	}
}

// startServe runs the worker from config text and returns the banner's
// operator API URL.
func startServe(t *testing.T, yaml string) string {
	t.Helper()
	cfg, err := loadConfig(writeFile(t, yaml), processEnviron())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan error)
	go func() { done <- serve(ctx, nil, cfg, &out, &errb) }()
	t.Cleanup(func() { cancel(); <-done })
	end := time.Now().Add(20 * time.Second)
	for {
		for _, line := range strings.Split(out.String(), "\n") {
			if rest, ok := strings.CutPrefix(line, "operator API:    "); ok {
				u, _, _ := strings.Cut(rest, " ")
				return u
			}
		}
		if time.Now().After(end) {
			t.Fatalf("no API URL in the banner:\n%s\n%s", out.String(), errb.String())
		}
		<-time.After(5 * time.Millisecond)
	}
}

func TestOperatorVerbsOverTheAPI(t *testing.T) { // not parallel: sets AGENT_WORKER_TOKEN
	t.Setenv("AGENT_WORKER_TOKEN", "s3cret-operate-token")
	t.Setenv("OPS_TOKEN", "s3cret-operate-token")
	url := startServe(t, `data_dir: `+t.TempDir()+`
nats: {listen: "-1"}
api: {listen: "127.0.0.1:0", tokens: [{name: ops, role: operate, value_env: OPS_TOKEN}]}
models:
  f: {provider: scripted, behaviour: demo}
agents: [{name: ops, model: f, tools: [schedule_next_turn], budgets: {session_usd: 5}}]
`)
	run := func(args ...string) (string, int) {
		var out, errb syncBuffer
		code := execute(context.Background(), append(args, "--api", url), &out, &errb)
		return out.String() + errb.String(), code
	}
	if out, code := run("status"); code != exitOK || !strings.Contains(out, "ops") || !strings.Contains(out, "sleeping") {
		t.Fatalf("status: %d\n%s", code, out)
	}
	if out, code := run("pause", "ops"); code != exitOK || !strings.Contains(out, "ops: paused on ") {
		t.Fatalf("pause: %d\n%s", code, out)
	}
	if out, code := run("wake", "ops"); code == exitOK || !strings.Contains(out, "paused") {
		t.Fatalf("wake while paused: %d\n%s", code, out)
	}
	if out, code := run("resume", "ops", "--message", "carry on"); code != exitOK || !strings.Contains(out, "ops: resumed on ") {
		t.Fatalf("resume: %d\n%s", code, out)
	}
	if out, code := run("reset", "ops", "session_usd", "--add-budget", "1"); code != exitOK || !strings.HasPrefix(out, "ops: session_usd reset; ceiling $5 → $6 (added $1); spent ") {
		t.Fatalf("reset: %d\n%s", code, out)
	}
	t.Setenv("AGENT_WORKER_TOKEN", "wrong")
	if out, code := run("pause", "ops"); code == exitOK || !strings.Contains(out, "401") {
		t.Fatalf("wrong token: %d\n%s", code, out)
	}
}

func TestRunRefusesAnOpenAPIWithoutAToken(t *testing.T) {
	t.Parallel()
	p := writeFile(t, "data_dir: "+t.TempDir()+"\nnats: {listen: \"-1\"}\napi: {listen: \"0.0.0.0:0\"}\nmodels:\n  f: {provider: scripted, behaviour: demo}\nagents: [{name: a, model: f}]\n")
	var out, errb syncBuffer
	if code := execute(context.Background(), []string{"run", "--config", p}, &out, &errb); code != exitConfig {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(errb.String(), "api.listen") || !strings.Contains(errb.String(), "api.tokens") {
		t.Fatalf("stderr: %s", errb.String())
	}
}

// A cost ceiling on a model without a price cannot bind: validate says so
// with file:line as a warning, exits 0, and exits non-zero with --strict.
func TestValidateWarnsOfACeilingOnAnUnpricedModel(t *testing.T) {
	t.Parallel()
	p := writeFile(t, `models:
  canned: {provider: scripted, model: fake-unpriced, script: [{text: ok}]}
  priced: {provider: scripted, model: gpt-4.1-mini, script: [{text: ok}]}
agents:
  - name: a
    model: canned
    budgets:
      daily_usd: 1
  - name: b
    model: priced
    budgets: {daily_usd: 1}
`)
	var out, errb syncBuffer
	if code := execute(context.Background(), []string{"validate", "--config", p}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	want := p + `:8: agents[0].budgets.daily_usd: warning: model "canned" (fake-unpriced) has no price`
	if !strings.Contains(errb.String(), want) || strings.Count(errb.String(), "warning:") != 1 || !strings.Contains(out.String(), "1 warning(s)") {
		t.Fatalf("stderr %q\nstdout %q\nwant %q", errb.String(), out.String(), want)
	}
	var strictErr syncBuffer
	if code := execute(context.Background(), []string{"validate", "--strict", "--config", p}, &out, &strictErr); code == exitOK {
		t.Fatalf("--strict with a warning exited 0: %s", strictErr.String())
	}
}
