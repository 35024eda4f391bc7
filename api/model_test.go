package api_test

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/models/scripted"
)

// switcher runs on main (fake-1), and may be switched to backup
// (backup-1, scripted: no reasoning effort).
func switcher() agentDef {
	return agentDef{
		name: "switcher", model: "fake-1",
		script:     []config.ScriptStep{scripted.Text("on main", 100, 10)},
		switchable: map[string]config.Model{"backup": {Provider: "scripted", Model: "backup-1", Script: []config.ScriptStep{scripted.Text("on backup", 100, 10)}, Loop: true}},
	}
}

// POST /v1/agents/{name}/model: bad bodies are 400 with a JSON error, a
// read token 403, a model the config does not define 422 naming the
// configured ones, an effort for a scripted model 422, an agent whose
// model cannot be switched 404 — each changing nothing. A switch is 200
// with the model in force, audited with the token's name, shown in the
// agent's view and on the status page; null goes back.
func TestModelSwitchEndpoint(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{}, switcher(), alpha())
	const path = "/v1/agents/switcher/model"
	for _, c := range []struct{ body, want string }{
		{``, "a JSON body is required"},
		{`{}`, `"model" is required`},
		{`{"model": 7}`, `"model" must be a key`},
		{`{"model": "backup", "reasoning_effort": "max"}`, `"reasoning_effort" "max": want one of low, medium, high`},
		{`{"model": null, "reasoning_effort": "low"}`, `"reasoning_effort" needs a "model"`},
		{`{"model": "backup", "temperature": 0}`, "unknown field"},
	} {
		r := w.post(path, c.body)
		if r.status != http.StatusBadRequest || !strings.Contains(r.errorText(t), c.want) {
			t.Errorf("body %s: %d %s, want 400 with %q", c.body, r.status, r.body, c.want)
		}
	}
	w.wantStatus(w.call(http.MethodPost, path, readToken, "application/json", `{"model": "backup"}`), http.StatusForbidden)

	r := w.post(path, `{"model": "gpt-5"}`)
	w.wantStatus(r, http.StatusUnprocessableEntity)
	if m := r.json(t); !reflect.DeepEqual(m["models"], []any{"backup", "main"}) || !strings.Contains(r.errorText(t), `model "gpt-5": not a configured model`) {
		t.Errorf("unknown model: %s", r.body)
	}
	r = w.post(path, `{"model": "backup", "reasoning_effort": "high"}`)
	w.wantStatus(r, http.StatusUnprocessableEntity)
	if !strings.Contains(r.errorText(t), "provider scripted has no reasoning to tune") {
		t.Errorf("effort for a scripted model: %s", r.body)
	}
	w.wantStatus(w.post("/v1/agents/alpha/model", `{"model": "backup"}`), http.StatusNotFound)
	if v := w.get("/v1/agents/switcher").json(t)["model_switch"].(map[string]any); v["switched"] != false || v["active"] != "main" {
		t.Fatalf("after refusals the view shows %v", v)
	}

	r = w.post(path, `{"model": "backup", "reason": "main is flaky"}`)
	w.wantStatus(r, http.StatusOK)
	if m := r.json(t); m["active"] != "backup" || m["active_name"] != "backup-1" || m["by"] != "ops" || m["reason"] != "main is flaky" {
		t.Errorf("switch answer %s", r.body)
	}
	if e := w.waitEvent("switcher", events.ModelSwitched); e.Data["by"] != "ops" || e.Data["model"] != "backup" {
		t.Errorf("model-switched %v", e.Data)
	}
	view := w.get("/v1/agents/switcher").json(t)
	if v := view["model_switch"].(map[string]any); v["switched"] != true || v["active_name"] != "backup-1" || v["configured_name"] != "fake-1" || view["model"] != "fake-1" {
		t.Errorf("view %v", view)
	}
	if page := string(w.get("/").body); !strings.Contains(page, "model backup-1 (backup), since 10:00:00 UTC (now) by ops: main is flaky; configured fake-1 (main)") {
		t.Errorf("the status page does not show the switch:\n%s", page)
	}

	w.wantStatus(w.post(path, `{"model": null}`), http.StatusOK)
	if v := w.get("/v1/agents/switcher").json(t)["model_switch"].(map[string]any); v["switched"] != false || v["active"] != "main" {
		t.Errorf("after going back the view shows %v", v)
	}
}
