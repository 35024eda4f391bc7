package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// chatReply is a Chat Completions answer of model with text and usage.
func chatReply(model, text string, in, out int) string {
	return fmt.Sprintf(`{
  "id": "chatcmpl-%s", "object": "chat.completion", "created": 1741570284, "model": %q,
  "choices": [{"index": 0, "message": {"role": "assistant", "content": %q, "refusal": null, "annotations": []},
    "logprobs": null, "finish_reason": "stop"}],
  "usage": {"prompt_tokens": %d, "completion_tokens": %d, "total_tokens": %d,
    "prompt_tokens_details": {"cached_tokens": 0}, "completion_tokens_details": {"reasoning_tokens": 0}}
}`, model, model, text, in, out, in+out)
}

// pairConfig is a worker on dataDir with the API api (its YAML) and two
// OpenAI-compatible models, main (main-model-1, at $10/$40 a million
// tokens in/out, served at mainURL, with the YAML keys mainExtra) and
// cheap (cheap-model-1, at $1/$4, at cheapURL), and agent triage on main.
func pairConfig(t *testing.T, dataDir, api, mainURL, mainExtra, cheapURL string) *config.Config {
	t.Helper()
	return loadYAML(t, fmt.Sprintf(`data_dir: %s
shutdown_grace: 5s
api: %s
nats: {listen: "-1"}
models:
  main: {provider: openai, model: main-model-1, base_url: %s/v1%s}
  cheap: {provider: openai, model: cheap-model-1, base_url: %s/v1}
pricing:
  main-model-1: {input_per_mtok: 10, output_per_mtok: 40}
  cheap-model-1: {input_per_mtok: 1, output_per_mtok: 4}
agents:
  - name: triage
    model: main
    tools: [report_done]
`, dataDir, api, mainURL, mainExtra, cheapURL))
}

// startReal starts a worker on cfg with its real models, as run does.
func startReal(t *testing.T, cfg *config.Config) *running {
	t.Helper()
	w, err := Start(context.Background(), cfg, Options{Log: debugLog()})
	if err != nil {
		t.Fatal(err)
	}
	r := &running{t: t, w: w, sub: w.Events().Subscribe(10000, nil)}
	if r.nc, _, err = w.NATS().Dial("test"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.stop)
	return r
}

// view GETs the agent's view from r's API with token.
func (r *running) view(token, agent string) (int, map[string]any) {
	r.t.Helper()
	req, err := http.NewRequestWithContext(r.t.Context(), http.MethodGet, "http://"+r.w.APIAddr()+"/v1/agents/"+agent, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		r.t.Fatal(err)
	}
	return resp.StatusCode, v
}

// An operator switches a live agent from its model (whose provider is
// having an incident) to another configured one at high reasoning
// effort, through the API with a token. The switch is audited, survives a
// restart on the same data directory (the embedded store), shows in the
// agent's view, and the next turn goes to the other model's server over
// its own wire, with the effort, priced at its price under its name in
// the guard and the metrics. An unknown model is refused with the
// configured ones named; going back (over the NATS control subject, with
// the token) sends the next turn to the configured model again.
func TestModelSwitchSurvivesARestartAndIsPriced(t *testing.T) {
	t.Parallel()
	main := newChatServer(t, 200, chatReply("main-model-1", "on it", 1000, 100))
	cheap := newChatServer(t, 200, chatReply("cheap-model-1", "on it, cheaply", 1000, 100))
	dir := t.TempDir()
	const token = "s3cret-operate"
	cfg := pairConfig(t, filepath.Join(dir, "data"), fmt.Sprintf(`{listen: "127.0.0.1:0", tokens: [{name: ops, role: operate, value_file: %s}]}`, tokenFile(t, dir, "ops", token)),
		main.URL, "", cheap.URL)
	r := startReal(t, cfg)
	wait.Within(t, deadline, "triage owned", func() bool { return r.w.Leases().Held("triage") })

	code, body := r.post(token, "/v1/agents/triage/model", `{"model": "gpt-5"}`)
	if code != http.StatusUnprocessableEntity || !reflect.DeepEqual(body["models"], []any{"cheap", "main"}) || body["error"] == nil {
		t.Fatalf("unknown model: %d %v, want 422 naming cheap and main", code, body)
	}
	code, body = r.post(token, "/v1/agents/triage/model", `{"model": "cheap", "reasoning_effort": "high", "reason": "main provider incident"}`)
	if code != http.StatusOK || body["active"] != "cheap" || body["active_name"] != "cheap-model-1" || body["reasoning_effort"] != "high" ||
		body["switched"] != true || body["by"] != "ops" || body["configured"] != "main" {
		t.Fatalf("switch: %d %v", code, body)
	}
	ev := r.waitEvent(events.ModelSwitched)
	if ev.Data["model"] != "cheap" || ev.Data["name"] != "cheap-model-1" || ev.Data["previous"] != "main" || ev.Data["by"] != "ops" ||
		ev.Data["reason"] != "main provider incident" || ev.Data["reasoning_effort"] != "high" {
		t.Errorf("model-switched event %v", ev.Data)
	}
	r.stop()

	r = startReal(t, cfg)
	wait.Within(t, deadline, "the switch restored after the restart", func() bool {
		code, v := r.view(token, "triage")
		m, _ := v["model_switch"].(map[string]any)
		return code == http.StatusOK && m["active"] == "cheap" && m["switched"] == true && m["by"] == "ops" && m["reason"] == "main provider incident"
	})
	r.publish("agents.triage.inbox", "disk full on db-1")
	charged := r.waitEvent(guard.EventCharged)
	const cost = (1000*1 + 100*4) / 1e6 // the cheap model's price, not main's $0.014
	if charged.Data["model"] != "cheap-model-1" || math.Abs(charged.Data["cost_usd"].(float64)-cost) > 1e-12 {
		t.Errorf("charge %v, want cheap-model-1 at $%v", charged.Data, cost)
	}
	r.waitEvent(events.TurnCompleted)
	if got, efforts := cheap.Requests(), cheap.Efforts(); !reflect.DeepEqual(got, []string{"cheap-model-1"}) || !reflect.DeepEqual(efforts, []string{"high"}) {
		t.Errorf("cheap got %q with efforts %q, want one request for cheap-model-1 at high", got, efforts)
	}
	if n := len(main.Requests()); n != 0 {
		t.Errorf("main got %d requests, want none", n)
	}
	with := func(model string) map[string]string {
		return map[string]string{"agent": "triage", "model": model, "priced": "true"}
	}
	wait.Within(t, deadline, "the cost in the metrics", func() bool {
		return value(t, scrape(t, r), "agent_worker_model_cost_usd_total", with("cheap-model-1")) > 0
	})
	f := scrape(t, r)
	if got := value(t, f, "agent_worker_model_cost_usd_total", with("cheap-model-1")); math.Abs(got-cost) > 1e-12 {
		t.Errorf("cost of cheap-model-1 = %v, want %v", got, cost)
	}
	if got := value(t, f, "agent_worker_model_cost_usd_total", with("main-model-1")); got != 0 {
		t.Errorf("cost of main-model-1 = %v, want 0", got)
	}

	// Back to the config over the NATS control subject, as any client
	// holding the token may; the body's by is not believed.
	reply := askControl(t, r.nc, token, `{"verb": "model", "model": "", "by": "mallory"}`)
	var back driver.ModelView
	if err := json.Unmarshal(reply.Result, &back); err != nil || !reply.OK || back.Active != "main" || back.Switched {
		t.Fatalf("back to the config over NATS: %+v (%v)", reply, err)
	}
	if ev := r.waitEvent(events.ModelSwitched); ev.Data["reset"] != true || ev.Data["previous"] != "cheap" || ev.Data["by"] != "ops" {
		t.Errorf("reset event %v", ev.Data)
	}
	r.publish("agents.triage.inbox", "disk full on db-2")
	if charged := r.waitEvent(guard.EventCharged); charged.Data["model"] != "main-model-1" || len(main.Requests()) != 1 {
		t.Errorf("after going back: charge %v, main got %d requests; want main-model-1, 1", charged.Data, len(main.Requests()))
	}
}
