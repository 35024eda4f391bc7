package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/driver"
)

// modelAPI answers POST /v1/agents/oncall/model as a worker configured
// with models main (gpt-4.1) and backup (o4-mini) would, switched 3
// minutes ago by ops, and records each request's body.
func modelAPI(t *testing.T) (*httptest.Server, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(data))
		mu.Unlock()
		if r.Method != http.MethodPost || r.URL.Path != "/v1/agents/oncall/model" || r.Header.Get("Authorization") != "Bearer tok" {
			http.NotFound(w, r)
			return
		}
		var req struct {
			Model  *string `json:"model"`
			Effort string  `json:"reasoning_effort"`
			Reason string  `json:"reason"`
		}
		_ = json.Unmarshal(data, &req)
		w.Header().Set("Content-Type", "application/json")
		v := driver.ModelView{Configured: "main", ConfiguredName: "gpt-4.1", Active: "main", ActiveName: "gpt-4.1"}
		switch {
		case req.Model == nil:
		case *req.Model == "backup":
			since := time.Now().Add(-3 * time.Minute)
			v.Active, v.ActiveName, v.ReasoningEffort, v.Switched, v.Since, v.By, v.Reason = "backup", "o4-mini", req.Effort, true, &since, "ops", req.Reason
		default:
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = io.WriteString(w, `{"error": "model \"`+*req.Model+`\": not a configured model (models: backup, main)", "models": ["backup", "main"]}`)
			return
		}
		_ = json.NewEncoder(w).Encode(v)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), bodies...)
	}
}

// TestModelVerb: `model AGENT NAME [--effort] [--reason]` and `model AGENT
// --reset` send the API's body and print the model in force as one line
// (golden); -o json prints the API's answer; the API's refusal of an
// unknown model is exit 1 with its message; a command line that names no
// model, or a model and --reset, or a bad effort is exit 2 and sends
// nothing.
func TestModelVerb(t *testing.T) {
	t.Parallel()
	env := testEnv(map[string]string{envToken: "tok"})
	for _, c := range []struct {
		args        []string
		body, out   string
		code        int
		errIncludes string
	}{
		{args: []string{"backup", "--effort", "high", "--reason", "provider incident"},
			body: `{"model":"backup","reason":"provider incident","reasoning_effort":"high"}`,
			out:  "oncall: model o4-mini (backup), reasoning effort high, switched 3m ago by ops: provider incident; configured gpt-4.1 (main); its next model call uses it\n"},
		{args: []string{"--reset"}, body: `{"model":null}`,
			out: "oncall: on its configured model gpt-4.1 (main) from its next model call\n"},
		{args: []string{"gpt-5"}, body: `{"model":"gpt-5"}`, code: exitFailed,
			errIncludes: `POST /v1/agents/oncall/model: model "gpt-5": not a configured model (models: backup, main) (HTTP 422)`},
		{args: nil, code: exitConfig, errIncludes: "give a model NAME"},
		{args: []string{"backup", "--reset"}, code: exitConfig, errIncludes: "not both"},
		{args: []string{"--reset", "--effort", "low"}, code: exitConfig, errIncludes: "--effort goes with a model NAME"},
		{args: []string{"backup", "--effort", "extreme"}, code: exitConfig, errIncludes: `--effort "extreme": want one of low, medium, high`},
	} {
		srv, bodies := modelAPI(t)
		out, errs, code := run(env, append([]string{"model", "oncall", "--api", srv.URL}, c.args...)...)
		name := strings.Join(c.args, " ")
		if code != c.code || out != c.out || !strings.Contains(errs, c.errIncludes) {
			t.Errorf("model oncall %s: exit %d, stdout %q, stderr %q\nwant exit %d, stdout %q, stderr with %q", name, code, out, errs, c.code, c.out, c.errIncludes)
		}
		sent := bodies()
		switch {
		case c.body == "" && len(sent) != 0:
			t.Errorf("model oncall %s sent %q, want nothing", name, sent)
		case c.body != "" && (len(sent) != 1 || sent[0] != c.body):
			t.Errorf("model oncall %s sent %q, want %s", name, sent, c.body)
		}
	}

	srv, _ := modelAPI(t)
	out, errs, code := run(env, "model", "oncall", "backup", "-o", "json", "--api", srv.URL)
	var v driver.ModelView
	if code != exitOK || json.Unmarshal([]byte(out), &v) != nil || v.Active != "backup" || !v.Switched || !strings.Contains(out, "\n  \"active\": \"backup\",") {
		t.Fatalf("-o json: exit %d: %s%s", code, out, errs)
	}
}

// TestStatusShowsAModelSwitch: status AGENT has a model line for a
// switched agent (who, when, why, effort, the configured one), and -o
// wide's MODEL is the model in force, marked switched.
func TestStatusShowsAModelSwitch(t *testing.T) {
	t.Parallel()
	now := time.Now()
	since := now.Add(-3 * time.Minute)
	a := fakeAgents(now)[0]
	a.ModelSwitch = &driver.ModelView{Configured: "main", ConfiguredName: "gpt-4.1-mini", Active: "backup", ActiveName: "o4-mini",
		ReasoningEffort: "low", Switched: true, Since: &since, By: "ops", Reason: "provider incident"}
	var b strings.Builder
	writeBlock(&b, a, now)
	wantLines(t, b.String(), "model:       model o4-mini (backup), reasoning effort low, switched 3m ago by ops: provider incident; configured gpt-4.1-mini (main)")
	b.Reset()
	if err := writeTable(&b, []api.AgentView{a}, true, now); err != nil {
		t.Fatal(err)
	}
	if rows := fields(b.String()); len(rows) != 2 || rows[1][14] != "o4-mini (switched)" {
		t.Errorf("wide table:\n%s", b.String())
	}
	a.ModelSwitch.Switched = false
	b.Reset()
	writeBlock(&b, a, now)
	if strings.Contains(b.String(), "model:") {
		t.Errorf("a model line for an agent on its configured model:\n%s", b.String())
	}
}
