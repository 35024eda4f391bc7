package worker

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/inbox/natsinbox"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// The audit cluster's API tokens: alice may operate, viewer may read.
const (
	aliceToken  = "alice-operate-3c9e"
	viewerToken = "viewer-read-81d2"
)

// auditCluster is replicas r1 and r2 of agent triage (pinned to r1, $2
// session ceiling, $1 a turn) on one external nats-server, whose APIs
// take the tokens alice and viewer.
type auditCluster struct {
	t    *testing.T
	url  string
	dir  string
	reps map[string]*running
	recs map[string]*recorder
}

func newAuditCluster(t *testing.T) *auditCluster {
	t.Helper()
	port, dir := freePort(t), t.TempDir()
	ns := runServer(t, port, filepath.Join(dir, "nats"))
	t.Cleanup(ns.Shutdown)
	for name, value := range map[string]string{"alice": aliceToken, "viewer": viewerToken} {
		if err := os.WriteFile(filepath.Join(dir, name+".token"), []byte(value), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := &auditCluster{t: t, url: ns.ClientURL(), dir: dir, reps: map[string]*running{}, recs: map[string]*recorder{}}
	c.start("r1")
	c.start("r2")
	wait.Within(t, deadline, "r1 owns the agent, r2 stands by", func() bool {
		return !c.reps["r1"].agent().Status().Standby && c.reps["r2"].agent().Status().Standby
	})
	return c
}

// start starts replica h (again, after stop: a restarted worker).
func (c *auditCluster) start(h string) *running {
	c.t.Helper()
	y := fmt.Sprintf(sealLine()+`data_dir: %s
shutdown_grace: 5s
api:
  listen: "127.0.0.1:0"
  tokens:
    - {name: alice, role: operate, value_file: %s}
    - {name: viewer, role: read, value_file: %s}
nats: {url: %q, ack_wait: 1s, max_message_bytes: 4096}
lease: {holder: %s, ttl: %s}
pricing:
  fake: {input_per_mtok: 10}
models:
  fake:
    provider: scripted
    script: %s
    loop: true
agents:
  - name: triage
    model: fake
    replica_affinity: r1
    budgets: {session_usd: 2}
    tools: [schedule_next_turn, report_done]
`, c.t.TempDir(), filepath.Join(c.dir, "alice.token"), filepath.Join(c.dir, "viewer.token"), c.url, h, ownerTTL, priced)
	p := filepath.Join(c.t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(y), 0o600); err != nil {
		c.t.Fatal(err)
	}
	cfg, err := config.Load(p)
	if err != nil {
		c.t.Fatalf("config:\n%v\n%s", err, y)
	}
	c.recs[h] = newRecorder()
	c.reps[h] = start(c.t, cfg, c.recs[h], nil)
	return c.reps[h]
}

// call sends a request with token to replica h's API.
func (c *auditCluster) call(h, token, method, path, body string) (int, []byte) {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(c.t.Context(), method, "http://"+c.reps[h].w.APIAddr()+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.StatusCode, data
}

// pauseView is the pause part of an agent view.
type pauseView struct {
	Owner       string     `json:"owner"`
	Paused      bool       `json:"paused"`
	PausedSince *time.Time `json:"paused_since"`
	PausedBy    string     `json:"paused_by"`
	PauseReason string     `json:"pause_reason"`
}

// TestAuditTrailThroughAStandbyAndARestart: every request goes to the
// standby r2 with alice's token and is carried out by the owner r1. The
// owner's guardrail-reset event names alice with her reason, the amount
// and the spend and ceiling before and after. A pause with a reason shows
// paused since, by alice and why in the view from either replica, and
// still does after r1 restarts — while r2 runs the agent in between and
// after r1 has it back. On the old code the event had none of these, and
// nothing said who paused the agent or why.
func TestAuditTrailThroughAStandbyAndARestart(t *testing.T) {
	t.Parallel()
	c := newAuditCluster(t)
	r1 := c.reps["r1"]
	r1.publish("agents.triage.inbox", "one")
	wait.Within(t, deadline, "the first turn", func() bool { return r1.agent().Status().Turns == 1 && r1.agent().State() == driver.Sleeping })
	r1.publish("agents.triage.inbox", "two")
	wait.Within(t, deadline, "the owner halted at $2", func() bool { return r1.agent().State() == driver.Halted })

	code, body := c.call("r2", aliceToken, http.MethodPost, "/v1/agents/triage/guardrails/reset",
		`{"guardrail": "session_usd", "add_budget_usd": 5, "reason": "incident 42"}`)
	if code != http.StatusOK {
		t.Fatalf("reset via r2: %d %s", code, body)
	}
	e := r1.waitEvent(guard.EventReset)
	for k, want := range map[string]any{"by": "alice", "reason": "incident 42", "guardrail": guard.Session, "add_budget_usd": 5.0,
		"spent_before_usd": 2.0, "ceiling_before_usd": 2.0, "spent_after_usd": 2.0, "ceiling_after_usd": 7.0, "cleared": true} {
		if e.Data[k] != want {
			t.Fatalf("the owner's guardrail-reset %s = %v, want %v: %v", k, e.Data[k], want, e.Data)
		}
	}
	wait.Within(t, deadline, "the reopened owner ran the halted message", func() bool {
		st := r1.agent().Status()
		return st.State == driver.Sleeping && st.InboxPending == 0 && st.Turns == 3
	})

	code, body = c.call("r2", aliceToken, http.MethodPost, "/v1/agents/triage/pause", `{"reason": "db migration"}`)
	if code != http.StatusOK || !strings.Contains(string(body), `"owner":"r1"`) {
		t.Fatalf("pause via r2: %d %s", code, body)
	}
	if e := r1.waitEvent(events.Paused); e.Data["by"] != "alice" || e.Data["reason"] != "db migration" {
		t.Fatalf("the owner's paused event %v", e.Data)
	}
	view := func(h string) (pauseView, bool) {
		code, body := c.call(h, viewerToken, http.MethodGet, "/v1/agents/triage", "")
		var v pauseView
		if code != http.StatusOK || json.Unmarshal(body, &v) != nil {
			return v, false
		}
		return v, true
	}
	first, ok := view("r2")
	if !ok || !first.Paused || first.PausedBy != "alice" || first.PauseReason != "db migration" || first.PausedSince == nil || first.Owner != "r1" {
		t.Fatalf("view via r2 of the paused agent: %+v", first)
	}
	same := func(v pauseView) bool {
		return v.Paused && v.PausedBy == "alice" && v.PauseReason == "db migration" && v.PausedSince != nil && v.PausedSince.Equal(*first.PausedSince)
	}

	r1.stop()
	wait.Within(t, deadline, "r2 runs the agent, restored paused by alice", func() bool {
		v, ok := view("r2")
		return ok && v.Owner == "r2" && same(v)
	})
	r1 = c.start("r1")
	wait.Within(t, deadline, "r1 has the agent back, paused by alice since the first pause", func() bool {
		v, ok := view("r2")
		return ok && v.Owner == "r1" && same(v) && r1.agent().State() == driver.Paused
	})
	if p, ok := r1.agent().PauseInfo(); !ok || p.By != "alice" || p.Reason != "db migration" {
		t.Fatalf("restarted owner's pause %+v, %v", p, ok)
	}
}

// TestResumeDropQueuedDeadLettersAndTheyNeverComeBack: three messages
// queue behind a pause. GET .../inbox on the standby lists the owner's
// three (ids, sources, sizes). A resume with drop_queued sent to the
// standby abandons them: the reply says 3, each is published to the
// agent's dead-letter subject with reason operator_dropped and counted in
// messages_rejected_total{reason="operator_dropped"}, the resumed turn
// sees none of them, and JetStream holds none for redelivery — also after
// the owner restarts, when no turn sees them and nothing more is
// dead-lettered. On the old code drop_queued was refused (400) and the
// inbox route did not exist.
func TestResumeDropQueuedDeadLettersAndTheyNeverComeBack(t *testing.T) {
	t.Parallel()
	c := newAuditCluster(t)
	r1 := c.reps["r1"]
	nc, err := nats.Connect(c.url) // outlives r1's restart
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	dlq, err := nc.SubscribeSync("agents.triage.dlq")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if code, body := c.call("r2", aliceToken, http.MethodPost, "/v1/agents/triage/pause", `{"reason": "flood"}`); code != http.StatusOK {
		t.Fatalf("pause via r2: %d %s", code, body)
	}
	texts := map[string]string{"flood-1": "stale alert one", "flood-2": "stale alert two", "flood-3": "stale alert three"}
	for _, id := range []string{"flood-1", "flood-2", "flood-3"} {
		m := nats.NewMsg("agents.triage.inbox")
		m.Header.Set(nats.MsgIdHdr, id)
		m.Data = []byte(texts[id])
		if err := r1.nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	wait.Within(t, deadline, "three queued behind the pause", func() bool { return r1.agent().Status().InboxPending == 3 })

	code, body := c.call("r2", viewerToken, http.MethodGet, "/v1/agents/triage/inbox", "")
	var in struct {
		Owner    string `json:"owner"`
		Pending  int    `json:"inbox_pending"`
		Messages []struct {
			ID        string  `json:"id"`
			Kind      string  `json:"kind"`
			Source    string  `json:"source"`
			SizeBytes int     `json:"size_bytes"`
			Age       float64 `json:"age_seconds"`
		} `json:"messages"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &in) != nil || in.Owner != "r1" || in.Pending != 3 || len(in.Messages) != 3 {
		t.Fatalf("inbox via r2: %d %s", code, body)
	}
	for i, m := range in.Messages {
		id := fmt.Sprintf("flood-%d", i+1)
		if m.ID != id || m.Kind != "inbox" || m.Source != "nats:agents.triage.inbox" || m.SizeBytes != len(texts[id])+len(id)+len(m.Source) || m.Age < 0 {
			t.Fatalf("inbox message %d: %+v", i, m)
		}
	}

	code, body = c.call("r2", aliceToken, http.MethodPost, "/v1/agents/triage/resume", `{"drop_queued": true, "reason": "stale alerts", "message": "start afresh"}`)
	if code != http.StatusOK || !strings.Contains(string(body), `"dropped":3`) || !strings.Contains(string(body), `"owner":"r1"`) {
		t.Fatalf("resume with drop_queued via r2: %d %s", code, body)
	}
	seen := map[string]bool{}
	for range 3 {
		m, err := dlq.NextMsg(deadline)
		if err != nil {
			t.Fatalf("dead letters: %v (got %v)", err, seen)
		}
		if m.Header.Get(natsinbox.HeaderRejectReason) != inbox.RejectOperatorDropped || m.Header.Get(natsinbox.HeaderAgent) != "triage" {
			t.Fatalf("dead letter headers %v", m.Header)
		}
		seen[string(m.Data)] = true
	}
	for _, text := range texts {
		if !seen[text] {
			t.Fatalf("%q was not dead-lettered: %v", text, seen)
		}
	}
	wait.Within(t, deadline, "the resumed turn", func() bool {
		st := r1.agent().Status()
		return st.Turns == 1 && st.State == driver.Sleeping && st.InboxPending == 0
	})
	if all := c.recs["r1"].all(); strings.Contains(all, "stale alert") {
		t.Fatalf("a turn saw a dropped message:\n%s", all)
	}
	wait.Within(t, deadline, "the stored cursors pass the dropped messages", func() bool { return cursorsOf(t, r1.w.Store(), "triage")["agents.triage.inbox"] >= 3 })
	if got := value(t, scrape(t, r1), "agent_worker_messages_rejected_total", map[string]string{"agent": "triage", "reason": "operator_dropped"}); got != 3 {
		t.Fatalf("messages_rejected_total{reason=operator_dropped} = %v, want 3", got)
	}

	r1.stop()
	r1 = c.start("r1")
	wait.Within(t, deadline, "the restarted r1 runs the agent again", func() bool {
		st := r1.agent().Status()
		return !st.Standby && st.State == driver.Sleeping
	})
	if n := r1.agent().Status().InboxPending; n != 0 {
		t.Fatalf("after the restart: %d queued", n)
	}
	for h, rec := range c.recs {
		if strings.Contains(rec.all(), "stale alert") {
			t.Fatalf("a turn on %s saw a dropped message after the restart:\n%s", h, rec.all())
		}
	}
	if n, _, err := dlq.Pending(); err != nil || n != 0 {
		t.Fatalf("%d more dead letters after the restart (%v)", n, err)
	}
}
