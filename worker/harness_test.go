package worker

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/adk/model"
	"google.golang.org/genai"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/models/scripted"
)

// deadline bounds every wait; waits end as soon as their condition holds.
const deadline = 30 * time.Second

// recorder is the scripted model's hook: it records each call's newest
// prompt and can hold calls until released.
type recorder struct {
	mu      sync.Mutex
	prompts []string
	hold    chan struct{}
	started chan int
}

func newRecorder() *recorder { return &recorder{started: make(chan int, 1000)} }

func (r *recorder) hook(ctx context.Context, req *model.LLMRequest, n int) error {
	r.mu.Lock()
	p := ""
	for i := len(req.Contents) - 1; i >= 0; i-- {
		c := req.Contents[i]
		if c.Role == genai.RoleUser && len(c.Parts) > 0 && c.Parts[0].Text != "" {
			p = c.Parts[0].Text
			break
		}
	}
	r.prompts = append(r.prompts, p)
	hold := r.hold
	r.mu.Unlock()
	r.started <- n
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return nil
}

func (r *recorder) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.prompts)
}

func (r *recorder) prompt(i int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.prompts[i]
}

// all returns every prompt so far, joined.
func (r *recorder) all() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.prompts, "\n====\n")
}

// setup describes the worker a test runs: one agent "triage" on a
// scripted model.
type setup struct {
	dataDir string // default: a fresh temp dir
	natsURL string // default: the embedded server
	api     string // the api mapping's YAML; default {listen: "127.0.0.1:0"}
	agent   string // YAML appended to the agent, indented 4
	top     string // YAML appended at the top level
	script  string // the model's script (flow YAML list); default: one text step
	tools   string // default [schedule_next_turn, report_done]
	ackWait string // default 1s, so redelivery tests are quick
	maxBody int    // nats.max_message_bytes; default 4096
}

func writeConfig(t testing.TB, s setup) *config.Config {
	t.Helper()
	if s.dataDir == "" {
		s.dataDir = t.TempDir()
	}
	if s.ackWait == "" {
		s.ackWait = "1s"
	}
	if s.maxBody == 0 {
		s.maxBody = 4096
	}
	if s.tools == "" {
		s.tools = "[schedule_next_turn, report_done]"
	}
	if s.script == "" {
		s.script = `[{text: "noted", usage: {input: 100, output: 10}}]`
	}
	if s.api == "" {
		s.api = `{listen: "127.0.0.1:0"}`
	}
	y := fmt.Sprintf(sealLine()+`data_dir: %s
shutdown_grace: 5s
api: %s
nats:
  url: %q
  listen: "-1"
  ack_wait: %s
  max_message_bytes: %d
%s
models:
  fake:
    provider: scripted
    script: %s
    loop: true
agents:
  - name: triage
    model: fake
    tools: %s
%s
`, s.dataDir, s.api, s.natsURL, s.ackWait, s.maxBody, s.top, s.script, s.tools, s.agent)
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatalf("config:\n%v\n%s", err, y)
	}
	return cfg
}

type running struct {
	t   *testing.T
	w   *Worker
	rec *recorder
	sub *events.Subscription
	nc  *nats.Conn
}

func start(t *testing.T, cfg *config.Config, rec *recorder, c clock.Clock) *running {
	t.Helper()
	w, err := Start(context.Background(), cfg, Options{
		Clock: c, Log: debugLog(),
		Models: func(_ string, def config.Model) (model.LLM, error) {
			return scripted.New("fake", def, scripted.WithHook(rec.hook))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &running{t: t, w: w, rec: rec, sub: w.Events().Subscribe(10000, nil)}
	r.nc, _, err = w.NATS().Dial("test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.stop)
	return r
}

// stop shuts the worker down, letting running turns finish.
func (r *running) stop() { r.stopWithin(context.Background()) }

func (r *running) stopWithin(grace context.Context) {
	if r.w == nil {
		return
	}
	r.nc.Close()
	r.w.Stop(grace)
	r.w = nil
}

// waitEvent returns the next event of type typ.
func (r *running) waitEvent(typ string) events.Event {
	r.t.Helper()
	return wait.Event(r.t, deadline, r.sub, "a "+typ+" event", wait.OfType(typ))
}

// firstEvent returns the worker's first event of type typ, published
// before the test subscribed (during Start: a lone replica restores and
// runs its agents' first turns before Start returns) or after.
func (r *running) firstEvent(typ string) events.Event {
	r.t.Helper()
	if evs, _ := r.w.Events().Since(0); len(evs) > 0 {
		for _, e := range evs {
			if e.Type == typ {
				return e
			}
		}
	}
	return r.waitEvent(typ)
}

func (r *running) publish(subject, body string) {
	r.t.Helper()
	if err := r.nc.Publish(subject, []byte(body)); err != nil {
		r.t.Fatal(err)
	}
	if err := r.nc.Flush(); err != nil {
		r.t.Fatal(err)
	}
}

func debugLog() *slog.Logger {
	if os.Getenv("AW_DEBUG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
