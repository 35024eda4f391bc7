package durable

import (
	"encoding/json"
	"fmt"
	"go/build"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/internal/fakeprovider"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// deadline bounds every wait: a failure guard, not a sleep.
const deadline = 90 * time.Second

// Prices in the config: $1 per million input tokens, $2 per million
// output tokens: each response charged once is this much in all.
const wantSpend = (fakeprovider.FirstIn + 2*fakeprovider.FirstOut + fakeprovider.SecondIn + 2*fakeprovider.SecondOut) / 1e6

// A worker killed with SIGKILL during the second model call of a turn
// whose first step published a report resumes the turn after a restart:
// exactly one report on the stream that captures the subject, exactly
// one first-step request at the provider, the message handled once by a
// turn that replayed the two recorded steps, and the spend charged once.
func TestKilledMidTurnResumesWithoutRepeatingItsSteps(t *testing.T) {
	dir := t.TempDir()
	bin := buildWorker(t, dir)
	url := natsServer(t, filepath.Join(dir, "nats"))
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := t.Context()
	reports, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "REPORTS", Subjects: []string{"ops.reports.>"}, Duplicates: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	prov := &fakeprovider.Provider{Subject: "ops.reports.db", Text: "disk full on db-1: cleaned /var/log", Hold: make(chan struct{}), Held: make(chan struct{})}
	fake := httptest.NewServer(prov)
	defer fake.Close()
	defer close(prov.Hold) // before Close, which waits for the held request

	api := freeAddr(t)
	cfg := filepath.Join(dir, "agent-worker.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`data_dir: %s
nats: {url: %q, ack_wait: 2s}
store: {url: "nats://"}
api: {listen: %q}
lease: {holder: durable-test}
models:
  main: {provider: openai, model: gpt-fake, base_url: %q, api_key_env: DURABLE_TEST_KEY}
pricing:
  gpt-fake: {input_per_mtok: 1, output_per_mtok: 2}
agents:
  - name: oncall
    model: main
    instruction: "Publish a report on ops.reports.db for each alert, then say so."
    tools: [publish]
    publish: ["ops.reports.>"]
`, filepath.Join(dir, "data"), url, api, fake.URL+"/v1")), 0o600); err != nil {
		t.Fatal(err)
	}

	first := startWorker(t, bin, cfg, filepath.Join(dir, "first.log"), api)
	msg := nats.NewMsg("agents.oncall.inbox")
	msg.Header.Set(nats.MsgIdHdr, "alert-1")
	msg.Data = []byte(`{"text": "disk full on db-1", "from": "alertmanager"}`)
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	select {
	case <-prov.Held:
	case <-time.After(deadline):
		t.Fatalf("the model was never asked the second step; worker log:\n%s", readLog(first.log))
	}
	// Its first response was charged before the crash (the guard writes
	// spend off the hot path): wait for the write, so the total below
	// tells a replayed response charged again from one charged once.
	wait.Within(t, deadline, "the first response's spend stored", func() bool { return storedSpend(t, js) > 0 })
	first.kill(t)

	second := startWorker(t, bin, cfg, filepath.Join(dir, "second.log"), api)
	defer second.kill(t)
	wait.Within(t, deadline, "alert-1 handled", func() bool {
		var info struct {
			Status string `json:"status"`
		}
		return getJSON(api, "/v1/agents/oncall/messages/alert-1", &info) == nil && info.Status == "handled"
	})

	firstSteps, secondSteps, _ := prov.Counts()
	if firstSteps != 1 {
		t.Errorf("the provider was asked the turn's first step %d times, want 1 (the resume replays it)", firstSteps)
	}
	if secondSteps != 2 {
		t.Errorf("second-step requests: %d, want 2 (the one the kill cut, and the resumed one)", secondSteps)
	}
	info, err := reports.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Errorf("%d reports on ops.reports.db, want exactly 1", info.State.Msgs)
	}
	var turns struct {
		Turns []struct {
			N        uint64 `json:"n"`
			Outcome  string `json:"outcome"`
			Replayed int    `json:"replayed"`
		} `json:"turns"`
	}
	if err := getJSON(api, "/v1/agents/oncall/turns", &turns); err != nil {
		t.Fatal(err)
	}
	completed := 0
	for _, tr := range turns.Turns {
		if tr.Outcome == "completed" {
			completed++
			if tr.Replayed != 2 {
				t.Errorf("the completed turn replayed %d steps, want 2 (the publish call and its result)", tr.Replayed)
			}
		}
	}
	if completed != 1 {
		t.Errorf("%d completed turns %+v, want 1", completed, turns.Turns)
	}
	var view struct {
		Guardrails struct {
			Session struct {
				Spent float64 `json:"spent_usd"`
			} `json:"session"`
		} `json:"guardrails"`
	}
	if err := getJSON(api, "/v1/agents/oncall", &view); err != nil {
		t.Fatal(err)
	}
	if got := view.Guardrails.Session.Spent; math.Abs(got-wantSpend) > 1e-9 {
		t.Errorf("session spend $%.6f, want $%.6f: each response charged once", got, wantSpend)
	}
	if t.Failed() {
		t.Logf("second worker's log:\n%s", readLog(second.log))
	}
}

// buildWorker builds cmd/agent-worker into dir.
func buildWorker(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "agent-worker")
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(build.Default.GOROOT, "bin", "go") // go not on PATH: the toolchain running the test
	}
	cmd := exec.Command(goBin, "build", "-o", bin, "../../cmd/agent-worker")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build agent-worker: %v\n%s", err, out)
	}
	return bin
}

// natsServer runs a JetStream nats-server in the test process, storing
// under dir; it is shut down when the test ends.
func natsServer(t *testing.T, dir string) string {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s.ClientURL()
}

type worker struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// startWorker runs `agent-worker run` and waits for /readyz.
func startWorker(t *testing.T, bin, cfg, log, api string) *worker {
	t.Helper()
	out, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	w := &worker{cmd: exec.Command(bin, "run", "--config", cfg), log: log, done: make(chan struct{})}
	w.cmd.Env = append(os.Environ(), "DURABLE_TEST_KEY=test-key")
	w.cmd.Stdout, w.cmd.Stderr = out, out
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = w.cmd.Wait(); out.Close(); close(w.done) }()
	t.Cleanup(func() { w.kill(t) })
	end := time.Now().Add(deadline)
	for time.Now().Before(end) {
		select {
		case <-w.done:
			t.Fatalf("worker exited at start:\n%s", readLog(log))
		default:
		}
		if r, err := http.Get("http://" + api + "/readyz"); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return w
			}
		}
		<-time.After(20 * time.Millisecond)
	}
	t.Fatalf("worker never ready:\n%s", readLog(log))
	return nil
}

// kill sends SIGKILL and waits for the process to be gone.
func (w *worker) kill(t *testing.T) {
	select {
	case <-w.done:
		return
	default:
	}
	_ = w.cmd.Process.Kill()
	select {
	case <-w.done:
	case <-time.After(deadline):
		t.Error("worker did not die after SIGKILL")
	}
}

// storedSpend reads the agent's session spend from its guard record in
// the state bucket.
func storedSpend(t *testing.T, js jetstream.JetStream) float64 {
	kv, err := js.KeyValue(t.Context(), "agent-worker-state")
	if err != nil {
		return 0
	}
	e, err := kv.Get(t.Context(), "guard.oncall")
	if err != nil {
		return 0
	}
	var rec struct {
		Spent float64 `json:"session_spent_usd"`
	}
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		t.Fatalf("guard record: %v: %s", err, e.Value())
	}
	return rec.Spent
}

func getJSON(api, path string, v any) error {
	r, err := http.Get("http://" + api + path)
	if err != nil {
		return err
	}
	defer r.Body.Close()
	if r.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, r.Status)
	}
	return json.NewDecoder(r.Body).Decode(v)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func readLog(path string) string {
	b, _ := os.ReadFile(path)
	s := string(b)
	if len(s) > 20000 {
		s = "…" + s[len(s)-20000:]
	}
	return strings.TrimSpace(s)
}
