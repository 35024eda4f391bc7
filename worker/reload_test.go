package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/adk/model"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/models/scripted"
)

// reloadFile writes the config of the reload tests: the agents' YAML
// under a fixed head, so that only the agents differ between versions
// (top adds top-level YAML, e.g. a restart-only change; models adds
// model definitions, indented under models:, besides fake).
func reloadFile(t *testing.T, path, dataDir, top, agents string, models ...string) {
	t.Helper()
	y := fmt.Sprintf(`data_dir: %s
shutdown_grace: 5s
api: {listen: "127.0.0.1:0"}
nats: {listen: "-1"}
%s
models:
  fake:
    provider: scripted
    script: [{text: "noted", usage: {input: 100, output: 10}}]
    loop: true
%s
agents:
%s
`, dataDir, top, strings.Join(models, ""), agents)
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// handledCounter counts message-handled events by message id.
type handledCounter struct {
	mu sync.Mutex
	n  map[string]int // agent/id → times handled
}

func (h *handledCounter) count(agent, id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[agent+"/"+id]
}

func (h *handledCounter) run(sub *events.Subscription) {
	for e := range sub.C {
		if e.Type != events.MessageHandled {
			continue
		}
		id, _ := e.Data["id"].(string)
		h.mu.Lock()
		h.n[e.Agent+"/"+id]++
		h.mu.Unlock()
	}
}

// startReloading starts a worker on the config file at path, which its
// reloads read again, with a count of the messages its agents handle and
// a JetStream client on its NATS; all stop when the test ends.
func startReloading(t *testing.T, path string) (*Worker, *handledCounter, jetstream.JetStream) {
	t.Helper()
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := Start(context.Background(), cfg, Options{Log: debugLog(),
		Source: func() (*config.Config, error) { return config.Load(path) },
		Models: func(_ string, def config.Model) (model.LLM, error) { return scripted.New("fake", def) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(context.Background()) })
	handled := &handledCounter{n: map[string]int{}}
	sub := w.Events().Subscribe(1000000, nil)
	go handled.run(sub)
	t.Cleanup(sub.Close)
	nc, _, err := w.NATS().Dial("test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return w, handled, js
}

// TestReloadWithMessagesInFlight is the operator's day: while a stream of
// messages flows to a running agent, the config is reloaded four times —
// an agent added, a schedule (and instruction) changed, an agent removed,
// and a broken file and a restart-only change refused — and every message
// is handled exactly once, by a completed turn. The added agent serves
// its input, the removed one is gone (lease released, turns stopped), the
// changed one fires its new schedule only, and the metrics and events say
// what happened.
func TestReloadWithMessagesInFlight(t *testing.T) {
	dataDir := t.TempDir()
	path := filepath.Join(t.TempDir(), "config.yaml")
	const triageV1 = `  - name: triage
    model: fake
    instruction: "v1"
    schedules: [{name: hourly, cron: "@every 1h", prompt: "hourly check"}]
`
	const ops = `  - name: ops
    model: fake
`
	reloadFile(t, path, dataDir, "", triageV1+ops)
	w, handled, js := startReloading(t, path)
	send := func(agent, id string) {
		t.Helper()
		msg := nats.NewMsg("agents." + agent + ".inbox")
		msg.Data = fmt.Appendf(nil, `{"text": "alert %s", "id": %q}`, id, id)
		if _, err := js.PublishMsg(context.Background(), msg); err != nil {
			t.Error(err)
		}
	}
	wait.Within(t, deadline, "the agents to be owned", func() bool { return w.Leases().Held("triage") && w.Leases().Held("ops") })
	send("ops", "ops-0")
	wait.Within(t, deadline, "ops-0 handled", func() bool { return handled.count("ops", "ops-0") == 1 })

	// The stream of messages to triage runs through every reload.
	const inFlight = 60
	published := make(chan struct{})
	go func() {
		defer close(published)
		for i := range inFlight {
			send("triage", fmt.Sprintf("m-%d", i))
		}
	}()
	reload := func(want string) Change {
		t.Helper()
		ch, err := w.ReloadConfig(context.Background(), "test")
		if want == ReloadRefused {
			var refusal *ReloadRefusal
			if !errors.As(err, &refusal) {
				t.Fatalf("reload: %v (%+v), want a refusal", err, ch)
			}
			return ch
		}
		if err != nil {
			t.Fatalf("reload: %v", err)
		}
		return ch
	}

	// 1. An agent added.
	reloadFile(t, path, dataDir, "", triageV1+ops+"  - {name: fresh, model: fake}\n")
	if ch := reload(ReloadApplied); strings.Join(ch.Added, ",") != "fresh" || len(ch.Changed)+len(ch.Removed) != 0 {
		t.Fatalf("add: %+v", ch)
	}
	wait.Within(t, deadline, "fresh to be owned", func() bool { return w.Leases().Held("fresh") })
	send("fresh", "f-0")
	wait.Within(t, deadline, "the added agent to handle its message", func() bool { return handled.count("fresh", "f-0") == 1 })

	// 2. A schedule (and the instruction) changed.
	const triageV2 = `  - name: triage
    model: fake
    instruction: "v2"
    schedules: [{name: nightly, cron: "0 3 * * *", prompt: "nightly check"}]
`
	old, _ := w.Driver().Agent("triage")
	reloadFile(t, path, dataDir, "", triageV2+ops+"  - {name: fresh, model: fake}\n")
	if ch := reload(ReloadApplied); strings.Join(ch.Changed, ",") != "triage" || !strings.Contains(strings.Join(ch.Why["triage"], ","), "schedules") {
		t.Fatalf("change: %+v", ch)
	}
	now, _ := w.Driver().Agent("triage")
	if now == old || strings.Join(now.Schedules(), ",") != "nightly" {
		t.Fatalf("triage after the change: same agent %v, schedules %v", now == old, now.Schedules())
	}
	if !w.Driver().Scheduler().Next("triage", "hourly").IsZero() || w.Driver().Scheduler().Next("triage", "nightly").IsZero() {
		t.Fatal("the scheduler still has the old schedule, or not the new one")
	}

	// 3. An agent removed.
	reloadFile(t, path, dataDir, "", triageV2+"  - {name: fresh, model: fake}\n")
	if ch := reload(ReloadApplied); strings.Join(ch.Removed, ",") != "ops" {
		t.Fatalf("remove: %+v", ch)
	}
	if _, err := w.Driver().Agent("ops"); err == nil {
		t.Fatal("the removed agent still runs")
	}
	if w.Leases().Held("ops") {
		t.Fatal("the removed agent's lease is still held")
	}

	// 4. A broken file, and a restart-only change, are refused whole.
	running := ConfigHash(w.Config())
	reloadFile(t, path, dataDir, "", triageV2+"  - {name: broken, model: nosuchmodel}\n")
	reload(ReloadRefused)
	reloadFile(t, path, dataDir, "store: {url: \"memory://\"}", triageV2+"  - {name: fresh, model: fake}\n  - {name: other, model: fake}\n")
	ch := reload(ReloadRefused)
	if len(ch.RestartOnly) != 1 || !regexp.MustCompile(`config\.yaml:\d+: store\.url`).MatchString(ch.RestartOnly[0]) {
		t.Fatalf("restart-only refusal: %q", ch.RestartOnly)
	}
	if ConfigHash(w.Config()) != running {
		t.Fatal("a refused reload changed the config in force")
	}
	if _, err := w.Driver().Agent("other"); err == nil {
		t.Fatal("a refused reload added an agent")
	}

	<-published
	for i := range inFlight {
		id := fmt.Sprintf("m-%d", i)
		wait.Within(t, deadline, id+" handled", func() bool { return handled.count("triage", id) >= 1 })
	}
	// Once handled, none again: let a last message through and check.
	send("triage", "last")
	wait.Within(t, deadline, "the last message handled", func() bool { return handled.count("triage", "last") == 1 })
	for i := range inFlight {
		if n := handled.count("triage", fmt.Sprintf("m-%d", i)); n != 1 {
			t.Errorf("m-%d handled %d times", i, n)
		}
	}

	rec := httptest.NewRecorder()
	w.Metrics().Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`agent_worker_config_reloads_total{outcome="applied"} 3`,
		`agent_worker_config_reloads_total{outcome="refused"} 2`,
		fmt.Sprintf(`agent_worker_config_info{hash=%q} 1`, running),
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	for _, want := range []string{
		`agent_worker_turns_total{agent="fresh",outcome="completed"} 1`,
		`agent_worker_schedule_runs_total{agent="triage",outcome="fired",schedule="nightly"} 0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s (the reloaded agents' series)", want)
		}
	}
	if n := strings.Count(string(body), "agent_worker_config_info{"); n != 1 {
		t.Errorf("%d config_info series, want 1 (the old ones deleted)", n)
	}
}

// TestReloadPricing: a new pricing table prices the agents' next turns
// (the ledger is built again with it) and the metrics' priced label
// follows; the spend already charged is kept.
func TestReloadPricing(t *testing.T) {
	dataDir := t.TempDir()
	path := filepath.Join(t.TempDir(), "config.yaml")
	const agents = "  - {name: triage, model: fake}\n"
	reloadFile(t, path, dataDir, "", agents)
	w, _, _ := startReloading(t, path)
	wait.Within(t, deadline, "triage owned", func() bool { return w.Leases().Held("triage") })
	if w.Guard().Priced("triage") {
		t.Fatal("priced before the pricing table")
	}
	reloadFile(t, path, dataDir, "pricing: {fake: {input_per_mtok: 10, output_per_mtok: 10}}", agents)
	ch, err := w.ReloadConfig(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(ch.Why["triage"], ",") != "pricing" {
		t.Fatalf("why: %v", ch.Why)
	}
	if !w.Guard().Priced("triage") {
		t.Fatal("not priced after the reload")
	}
	rec := httptest.NewRecorder()
	w.Metrics().Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if body := rec.Body.String(); !strings.Contains(body, `agent_worker_model_cost_usd_total{agent="triage",model="fake",priced="true"} 0`) {
		t.Fatal("the metrics do not say the model is priced now")
	}
}
