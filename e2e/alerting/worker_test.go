package alerting

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/adk/model"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/models/scripted"
	"github.com/agent-worker/agent-worker/worker"
)

// agent is the agent Alertmanager notifies; the receiver config in
// testdata names it in its URL.
const agent = "oncall"

// maxMessageBytes is the worker's nats.max_message_bytes: small enough
// that 150 rendered alerts do not fit in one message.
const maxMessageBytes = 16384

// workerConfig is the worker the test runs: embedded NATS on a random
// port, the API on a free loopback port with three tokens read from files
// (Alertmanager's ingest token scoped to the agent, Prometheus' read token
// for /metrics, which is not open here, and the test's operate token), and
// one agent on a scripted model that answers every call with text.
const workerConfig = `data_dir: %[1]s/data
shutdown_grace: 5s
api:
  listen: "127.0.0.1:0"
  open_paths: [/healthz, /readyz]
  tokens:
    - {name: alertmanager, role: ingest, value_file: %[1]s/ingest-token, agents: [oncall]}
    - {name: prometheus, role: read, value_file: %[1]s/read-token}
    - {name: e2e, role: operate, value_file: %[1]s/operate-token}
nats:
  listen: "-1"
  max_message_bytes: %[2]d
models:
  fake:
    provider: scripted
    script: [{text: "noted", usage: {input: 100, output: 10}}]
    loop: true
webhooks:
  ci: {agent: oncall, text: "build {{.build}} of {{.repository}}: {{.status}}", id: "{{.repository}}-{{.build}}"}
agents:
  - name: oncall
    model: fake
    instruction: "You are on call: assess each alert and say what you would do."
    tools: [schedule_next_turn, report_done]
`

// agentWorker is the in-process worker and what the test watches of it.
type agentWorker struct {
	w      *worker.Worker
	url    string // the operator API, http://127.0.0.1:port
	dir    string
	tokens map[string]string // role → token value
	rec    *recorder
	tl     *timeline

	mu     sync.Mutex
	events []events.Event
}

// tokenFile is where the value of the token of a role is.
func (aw *agentWorker) tokenFile(role string) string {
	return filepath.Join(aw.dir, role+"-token")
}

func startWorker(t *testing.T, dir string, tl *timeline) *agentWorker {
	t.Helper()
	aw := &agentWorker{dir: dir, tokens: map[string]string{}, tl: tl, rec: &recorder{tl: tl}}
	for _, role := range []string{"ingest", "read", "operate"} {
		aw.tokens[role] = rand.Text()
		if err := os.WriteFile(aw.tokenFile(role), []byte(aw.tokens[role]), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "agent-worker.yaml")
	if err := os.WriteFile(path, fmt.Appendf(nil, workerConfig, dir, maxMessageBytes), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("worker config: %v", err)
	}
	logFile, err := os.Create(filepath.Join(dir, "worker.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = logFile.Close()
		if t.Failed() {
			t.Logf("worker log: %s", logFile.Name())
		}
	})
	aw.w, err = worker.Start(context.Background(), cfg, worker.Options{
		Log: slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Models: func(_ string, def config.Model) (model.LLM, error) {
			return scripted.New("fake", def, scripted.WithHook(aw.rec.hook))
		},
	})
	if err != nil {
		t.Fatalf("start the worker: %v", err)
	}
	aw.url = "http://" + aw.w.APIAddr()
	sub := aw.w.Events().Subscribe(10000, func(e events.Event) bool { return e.Agent == agent })
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range sub.C {
			aw.onEvent(e)
		}
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		aw.w.Stop(ctx)
		sub.Close()
		<-done
	})
	return aw
}

// onEvent keeps the agent's events and puts the ones that tell the story
// on the timeline.
func (aw *agentWorker) onEvent(e events.Event) {
	aw.mu.Lock()
	aw.events = append(aw.events, e)
	aw.mu.Unlock()
	d := func(k string) any { return e.Data[k] }
	switch e.Type {
	case events.Wake:
		aw.tl.add(e.Time, "worker: wake, source %v", d("source"))
	case events.MessageQueued:
		aw.tl.add(e.Time, "worker: queued %v message %v (source %v)", d("kind"), d("id"), d("source"))
	case events.MessageDuplicate:
		aw.tl.add(e.Time, "worker: %v was handled before: acked without a turn", d("id"))
	case events.MessageRejected:
		aw.tl.add(e.Time, "worker: message rejected: %v", d("reason"))
	case events.TurnStarted:
		aw.tl.add(e.Time, "worker: turn %v started: %v message(s), wakes %v", d("turn"), d("messages"), d("wakes"))
	case events.TurnCompleted:
		aw.tl.add(e.Time, "worker: turn %v completed", d("turn"))
	case events.TurnFailed:
		aw.tl.add(e.Time, "worker: turn %v failed: %v %v", d("turn"), d("outcome"), d("error"))
	}
}

// eventsSince returns the agent's events from index i on, and the index
// after the last one.
func (aw *agentWorker) eventsSince(i int) ([]events.Event, int) {
	aw.mu.Lock()
	defer aw.mu.Unlock()
	return append([]events.Event(nil), aw.events[i:]...), len(aw.events)
}

func (aw *agentWorker) eventCount() int {
	aw.mu.Lock()
	defer aw.mu.Unlock()
	return len(aw.events)
}

// view is the part of GET /v1/agents/{name} the test reads.
type view struct {
	State           string `json:"state"`
	InboxPending    int    `json:"inbox_pending"`
	DeferredPending int    `json:"deferred_pending"`
	Turns           uint64 `json:"turns"`
}

// agentView asks the operator API for the agent, with the operate token.
func (aw *agentWorker) agentView(t *testing.T) view {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, aw.url+"/v1/agents/"+agent, nil)
	req.Header.Set("Authorization", "Bearer "+aw.tokens["operate"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v view
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/agents/%s: %s", agent, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// recorder is the scripted model's hook: it records the prompt of every
// model call (the newest user text, as worker/harness_test.go does). The
// script answers each call with text, so there is one call per turn.
type recorder struct {
	tl      *timeline
	mu      sync.Mutex
	prompts []string
}

func (r *recorder) hook(_ context.Context, req *model.LLMRequest, n int) error {
	p := ""
	for i := len(req.Contents) - 1; i >= 0; i-- {
		c := req.Contents[i]
		if c.Role == genai.RoleUser && len(c.Parts) > 0 && c.Parts[0].Text != "" {
			p = c.Parts[0].Text
			break
		}
	}
	r.mu.Lock()
	r.prompts = append(r.prompts, p)
	r.mu.Unlock()
	r.tl.now("model call %d, prompt of %s: %s", n, kib(len(p)), digest(p))
	return nil
}

// turns returns the prompts of the model calls so far.
func (r *recorder) turns() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.prompts...)
}

// digest picks out of a prompt what the timeline shows: each
// notification's header, how many alert lines follow it, and the lines
// that say alerts were left out.
func digest(p string) string {
	var parts []string
	lines := strings.Split(p, "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, "Alertmanager notification") {
			continue
		}
		n := 0
		var extra []string
		for i+1 < len(lines) {
			next := strings.TrimSpace(lines[i+1])
			if strings.HasPrefix(next, "- FIRING") || strings.HasPrefix(next, "- RESOLVED") {
				n++
			} else if strings.HasPrefix(next, "(") {
				extra = append(extra, next)
			} else {
				break
			}
			i++
		}
		header, _, _ := strings.Cut(l, " receiver=")
		s := fmt.Sprintf("%s, %d alert line(s)", header, n)
		if len(extra) > 0 {
			s += " " + strings.Join(extra, " ")
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return clip(p, 120)
	}
	return fmt.Sprintf("%d notification(s): %s", len(parts), strings.Join(parts, "; "))
}
