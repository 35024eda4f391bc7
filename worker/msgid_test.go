package worker

// Message ids are per agent: the same id (or the same Alertmanager
// notification) sent to two agents is queued for both, and only a repeat
// to the same agent is a duplicate. Before, the worker published with
// the plain id as Nats-Msg-Id, which JetStream deduplicates across the
// whole stream: the second agent's copy was answered "duplicate" (reason
// stream) and never queued.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// The two agents' API tokens: feeder may only ingest, and only for
// triage; ops may operate any agent.
const (
	feederToken = "feeder-ingest-5a71"
	opsToken    = "ops-operate-0c3f"
)

// startTwoAgents starts one worker on its embedded NATS server with the
// agents triage and other, whose API takes the tokens feeder and ops.
func startTwoAgents(t *testing.T) *running {
	t.Helper()
	dir := t.TempDir()
	for name, value := range map[string]string{"feeder": feederToken, "ops": opsToken} {
		if err := os.WriteFile(filepath.Join(dir, name+".token"), []byte(value), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	y := fmt.Sprintf(`data_dir: %s
shutdown_grace: 5s
api:
  listen: "127.0.0.1:0"
  tokens:
    - {name: feeder, role: ingest, agents: [triage], value_file: %s}
    - {name: ops, role: operate, value_file: %s}
nats: {listen: "-1", ack_wait: 1s, max_message_bytes: 4096}
models:
  fake:
    provider: scripted
    script: [{text: "noted", usage: {input: 100, output: 10}}]
    loop: true
agents:
  - name: triage
    model: fake
    tools: [schedule_next_turn, report_done]
  - name: other
    model: fake
    tools: [schedule_next_turn, report_done]
`, filepath.Join(dir, "data"), filepath.Join(dir, "feeder.token"), filepath.Join(dir, "ops.token"))
	p := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(p, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatalf("config:\n%v\n%s", err, y)
	}
	return start(t, cfg, newRecorder(), nil)
}

// post sends body to path on r's API with token (none when empty) and
// returns the status and the decoded answer.
func (r *running) post(token, path, body string) (int, map[string]any) {
	r.t.Helper()
	req, err := http.NewRequestWithContext(r.t.Context(), http.MethodPost, "http://"+r.w.APIAddr()+path, strings.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		r.t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		r.t.Fatalf("POST %s: %d %s: %v", path, resp.StatusCode, data, err)
	}
	return resp.StatusCode, m
}

// waitHandled waits until each of agents has handled a message with id
// (its message-handled event names that id, as the sender gave it) and
// the lookup GET /v1/agents/{name}/messages/{id} says handled.
func (r *running) waitHandled(id string, agents ...string) {
	r.t.Helper()
	left := map[string]bool{}
	for _, a := range agents {
		left[a] = true
	}
	timeout := time.After(deadline)
	for len(left) > 0 {
		select {
		case e := <-r.sub.C:
			if e.Type == events.MessageHandled && e.Data["id"] == id {
				delete(left, e.Agent)
			}
		case <-timeout:
			r.t.Fatalf("no message-handled event for id %q within %v from %v", id, deadline, left)
		}
	}
	for _, a := range agents {
		req, err := http.NewRequestWithContext(r.t.Context(), http.MethodGet, "http://"+r.w.APIAddr()+"/v1/agents/"+a+"/messages/"+id, nil)
		if err != nil {
			r.t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+opsToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			r.t.Fatal(err)
		}
		var info struct {
			Status string `json:"status"`
		}
		err = json.NewDecoder(resp.Body).Decode(&info)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || info.Status != "handled" {
			r.t.Fatalf("GET /v1/agents/%s/messages/%s: %d %+v %v, want handled", a, id, resp.StatusCode, info, err)
		}
	}
}

// A feeder whose token is scoped to triage sends inc-42 to triage; the
// same id sent to other by ops is queued too (before: 200 duplicate,
// reason stream, and other never saw it), both agents handle it under
// the id the sender gave, and only a repeat to triage is a duplicate.
func TestTheSameIDToTwoAgentsIsQueuedForBoth(t *testing.T) {
	t.Parallel()
	r := startTwoAgents(t)
	const msg = `{"text": "disk full on db-1", "id": "inc-42"}`
	if code, ans := r.post(feederToken, "/v1/agents/triage/messages", msg); code != http.StatusAccepted || ans["status"] != "queued" || ans["id"] != "inc-42" {
		t.Fatalf("feeder to triage: %d %v, want 202 queued inc-42", code, ans)
	}
	if code, ans := r.post(feederToken, "/v1/agents/other/messages", msg); code != http.StatusForbidden {
		t.Fatalf("feeder to other: %d %v, want 403 (its token is scoped to triage)", code, ans)
	}
	if code, ans := r.post(opsToken, "/v1/agents/other/messages", msg); code != http.StatusAccepted || ans["status"] != "queued" || ans["id"] != "inc-42" {
		t.Fatalf("ops to other after feeder to triage: %d %v, want 202 queued inc-42", code, ans)
	}
	r.waitHandled("inc-42", "triage", "other")
	for _, a := range []string{"triage", "other"} {
		if code, ans := r.post(opsToken, "/v1/agents/"+a+"/messages", msg); code != http.StatusOK || ans["status"] != "duplicate" || ans["id"] != "inc-42" {
			t.Fatalf("repeat to %s: %d %v, want 200 duplicate", a, code, ans)
		}
	}
}

// One Alertmanager notification posted to two agents' receivers is queued
// for each under the same id; a repeat to either is a duplicate.
func TestOneNotificationToTwoReceiversReachesBoth(t *testing.T) {
	t.Parallel()
	r := startTwoAgents(t)
	fired := amPayload(t, 2, time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC), false)
	code, first := r.post(feederToken, "/v1/alertmanager/triage", fired)
	if code != http.StatusAccepted || first["status"] != "queued" {
		t.Fatalf("notification to triage: %d %v", code, first)
	}
	code, second := r.post(opsToken, "/v1/alertmanager/other", fired)
	if code != http.StatusAccepted || second["status"] != "queued" || second["id"] != first["id"] {
		t.Fatalf("the same notification to other: %d %v, want 202 queued %v", code, second, first["id"])
	}
	r.waitHandled(first["id"].(string), "triage", "other")
	if code, again := r.post(opsToken, "/v1/alertmanager/other", fired); code != http.StatusOK || again["status"] != "duplicate" {
		t.Fatalf("repeat to other: %d %v, want 200 duplicate", code, again)
	}
}

// Below the API's own per-agent window, the stream itself keys a message
// by agent and id: a second publish of an id to the same agent is
// JetStream's duplicate, the same id to another agent is not.
func TestDeliverDeduplicatesPerAgent(t *testing.T) {
	t.Parallel()
	r := startTwoAgents(t)
	m := inbox.Message{ID: "deploy-7", Kind: inbox.Wake, Source: api.SourceAPI, Text: "deploy 7 finished"}
	if err := r.w.deliver(t.Context(), "triage", m); err != nil {
		t.Fatalf("to triage: %v", err)
	}
	if err := r.w.deliver(t.Context(), "other", m); err != nil {
		t.Fatalf("the same id to other: %v, want queued", err)
	}
	if err := r.w.deliver(t.Context(), "triage", m); !errors.Is(err, api.ErrDuplicate) {
		t.Fatalf("again to triage: %v, want ErrDuplicate", err)
	}
	r.waitHandled("deploy-7", "triage", "other")
}

// A subagent's id is predictable (<parent>-sub-<n>): sent beforehand as
// a message id to another agent, it was the stream's duplicate of the
// subagent's report to its parent, which was dropped ("already
// published") and never reached the parent. Now triage's report arrives
// whatever other agents were sent.
func TestAnotherAgentsIDCannotSilenceASubagentReport(t *testing.T) {
	t.Parallel()
	s := subSetup{
		parent: `[` + spawnStep("count the widgets in warehouse 7") + `, {text: "waiting for the count"}, {text: "42 it is"}]`,
		sub:    `[{text: "42 widgets"}]`,
		agent:  "    subagents: {model: sub}\n  - name: other\n    model: sub\n",
	}
	r1, _ := subCluster(t, 1, s, false)
	if code, ans := r1.post("", "/v1/agents/other/messages", `{"text": "noise", "id": "triage-sub-1"}`); code != http.StatusAccepted {
		t.Fatalf("to other: %d %v", code, ans)
	}
	r1.publish("agents.triage.inbox", "how many widgets?")
	wake := `[wake: subagent "triage-sub-1" reported]`
	wait.Within(t, deadline, "triage's turn woken by its subagent's report", func() bool { return strings.Contains(r1.rec.all(), wake) })
}
