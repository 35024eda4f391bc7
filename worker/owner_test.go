package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/store"
)

// The replicas in these tests pin the agent to r1 (replica_affinity), so
// r1 owns it for as long as it lives, and hold leases for a minute, so a
// dead r1's lease stays fresh while a test runs: no other replica can own
// the agent then.
const ownerTTL = "60s"

// priced makes each turn of the scripted model cost exactly $1 (100k
// input tokens at $10 per million).
const priced = `[{text: "noted", usage: {input: 100000, output: 10}}]`

// replicaConfig is one replica's config on the shared NATS server natsURL
// (JetStream, and the store on its KV): agent triage, pinned to r1, with
// a $2 session ceiling. agentYAML and modelsYAML are appended to the
// agent and to models.
func replicaConfig(t *testing.T, holder, natsURL, script, agentYAML, modelsYAML string) *config.Config {
	t.Helper()
	if script == "" {
		script = `[{text: "noted", usage: {input: 100, output: 10}}]`
	}
	y := fmt.Sprintf(sealLine()+`data_dir: %s
shutdown_grace: 5s
api: {listen: "127.0.0.1:0"}
nats: {url: %q, ack_wait: 1s, max_message_bytes: 4096}
lease: {holder: %s, ttl: %s}
pricing:
  fake: {input_per_mtok: 10}
models:
  fake:
    provider: scripted
    script: %s
    loop: true
%s
agents:
  - name: triage
    model: fake
    replica_affinity: r1
    budgets: {session_usd: 2}
%s
`, t.TempDir(), natsURL, holder, ownerTTL, script, modelsYAML, agentYAML)
	if !strings.Contains(agentYAML, "tools:") {
		y += "    tools: [schedule_next_turn, report_done]\n"
	}
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

// cluster is replicas r1..rN of one agent on one external nats-server.
type cluster struct {
	t    *testing.T
	reps map[string]*running
	recs map[string]*recorder
}

func newCluster(t *testing.T, n int, script, agentYAML, modelsYAML string) *cluster {
	t.Helper()
	port, dir := freePort(t), t.TempDir()
	ns := runServer(t, port, dir)
	t.Cleanup(ns.Shutdown)
	c := &cluster{t: t, reps: map[string]*running{}, recs: map[string]*recorder{}}
	for i := 1; i <= n; i++ {
		h := fmt.Sprintf("r%d", i)
		c.recs[h] = newRecorder()
		c.reps[h] = start(t, replicaConfig(t, h, ns.ClientURL(), script, agentYAML, modelsYAML), c.recs[h], nil)
	}
	wait.Within(t, deadline, "r1 owns the agent, the others stand by", func() bool {
		for h, r := range c.reps {
			if r.agent().Status().Standby != (h != "r1") {
				return false
			}
		}
		return true
	})
	return c
}

// call sends a request to replica h's API.
func (c *cluster) call(h, method, path, body string) (int, []byte) {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+c.reps[h].w.APIAddr()+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
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

// view is GET /v1/agents/triage on h, as a JSON object.
func (c *cluster) view(h string) map[string]any {
	c.t.Helper()
	code, body := c.call(h, http.MethodGet, "/v1/agents/triage", "")
	var v map[string]any
	if code != http.StatusOK || json.Unmarshal(body, &v) != nil {
		c.t.Fatalf("GET /v1/agents/triage on %s: %d %s", h, code, body)
	}
	return v
}

// sameFromEveryReplica checks that the views differ only in served_by,
// which names the replica, and all name r1 as the owner.
func sameFromEveryReplica(t *testing.T, views map[string]map[string]any) map[string]any {
	t.Helper()
	var first map[string]any
	for h, v := range views {
		if v["served_by"] != h || v["owner"] != "r1" {
			t.Fatalf("view from %s: owner %v, served_by %v", h, v["owner"], v["served_by"])
		}
		delete(v, "served_by")
		if first == nil {
			first = v
			continue
		}
		if !reflect.DeepEqual(v, first) {
			a, _ := json.Marshal(first)
			b, _ := json.Marshal(v)
			t.Fatalf("views differ between replicas:\n%s\n%s", a, b)
		}
	}
	return first
}

// TestVerbsAndViewsAreTheOwnersOnEveryReplica: three replicas, r1 owns
// the agent. A pause sent to r2 pauses r1's agent (no more turns there);
// a resume sent to r3 runs exactly one turn on r1; every replica's GET
// /v1/agents/triage, list and status page are r1's view, naming r1, the
// same from each but for served_by. On the old code a standby carried the
// verbs out on its own idle copy and showed its own state (turns 0).
func TestVerbsAndViewsAreTheOwnersOnEveryReplica(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, "", "", "")
	r1, rec1 := c.reps["r1"], c.recs["r1"]
	r1.publish("agents.triage.inbox", "first")
	wait.Within(t, deadline, "r1's first turn", func() bool { return r1.agent().Status().Turns == 1 && r1.agent().State() == driver.Sleeping })

	code, body := c.call("r2", http.MethodPost, "/v1/agents/triage/pause", "")
	var reply struct {
		OK    bool   `json:"ok"`
		State string `json:"state"`
		Owner string `json:"owner"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &reply) != nil || !reply.OK || reply.State != "paused" || reply.Owner != "r1" {
		t.Fatalf("pause via r2: %d %s", code, body)
	}
	if !r1.agent().Status().Paused {
		t.Fatal("the owner's agent is not paused")
	}
	if _, err := r1.w.Store().Get(t.Context(), "agent.triage.paused"); err != nil {
		t.Fatalf("the owner's pause is not stored: %v", err)
	}
	calls := rec1.calls()
	r1.publish("agents.triage.inbox", "while paused")
	wait.Within(t, deadline, "the message queued behind the pause", func() bool { return r1.agent().Status().InboxPending == 1 })
	if n := rec1.calls(); n != calls {
		t.Fatalf("the paused owner ran %d more model calls", n-calls)
	}

	code, body = c.call("r3", http.MethodPost, "/v1/agents/triage/resume", `{"message": "carry on"}`)
	if code != http.StatusOK || !strings.Contains(string(body), `"owner":"r1"`) {
		t.Fatalf("resume via r3: %d %s", code, body)
	}
	wait.Within(t, deadline, "one turn on the owner", func() bool {
		st := r1.agent().Status()
		return st.Turns == 2 && st.State == driver.Sleeping && st.InboxPending == 0
	})
	if n := rec1.calls(); n != calls+1 || !strings.Contains(rec1.prompt(n-1), "while paused") || !strings.Contains(rec1.prompt(n-1), "carry on") {
		t.Fatalf("resume ran %d model calls, want 1 with the queued message and the instruction:\n%s", n-calls, rec1.all())
	}
	if c.recs["r2"].calls()+c.recs["r3"].calls() != 0 {
		t.Fatal("a standby ran the agent")
	}

	views := map[string]map[string]any{}
	for h := range c.reps {
		views[h] = c.view(h)
	}
	v := sameFromEveryReplica(t, views)
	if v["turns"] != 2.0 || v["last_turn"] == nil || v["paused"] != false || v["standby"] != nil {
		t.Fatalf("the view is not the owner's: %v", v)
	}
	lists := map[string]map[string]any{}
	for h := range c.reps {
		code, body := c.call(h, http.MethodGet, "/v1/agents", "")
		var list struct{ Agents []map[string]any }
		if code != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list.Agents) != 1 {
			t.Fatalf("list on %s: %d %s", h, code, body)
		}
		lists[h] = list.Agents[0]
	}
	if l := sameFromEveryReplica(t, lists); !reflect.DeepEqual(l, v) {
		t.Fatalf("the list's view differs from GET /v1/agents/triage:\n%v\n%v", l, v)
	}
	if code, page := c.call("r3", http.MethodGet, "/", ""); code != http.StatusOK || !bytes.Contains(page, []byte("on r1")) || !bytes.Contains(page, []byte("served by r3")) {
		t.Fatalf("status page on r3: %d\n%s", code, page)
	}
}

// storedLedger reads the agent's stored guardrail ledger.
type storedLedger struct {
	SessionSpent float64     `json:"session_spent_usd"`
	SessionAdded float64     `json:"session_added_usd"`
	Trip         *guard.Trip `json:"trip"`
	raw          []byte
	rev          uint64
}

func readLedger(t *testing.T, st store.Store) storedLedger {
	t.Helper()
	e, err := st.Get(context.Background(), "guard.triage")
	if err != nil {
		t.Fatalf("guard.triage: %v", err)
	}
	l := storedLedger{raw: e.Value, rev: e.Revision}
	if err := json.Unmarshal(e.Value, &l); err != nil {
		t.Fatal(err)
	}
	return l
}

// watchSpend polls the stored session spend until stop and returns every
// decrease it saw.
func watchSpend(t *testing.T, st store.Store) (stop func() []string) {
	var mu sync.Mutex
	var drops []string
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		last := -1.0
		for {
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
			e, err := st.Get(context.Background(), "guard.triage")
			if err != nil {
				continue // not written yet, or a transient error
			}
			var l storedLedger
			if json.Unmarshal(e.Value, &l) != nil {
				continue
			}
			if l.SessionSpent < last {
				mu.Lock()
				drops = append(drops, fmt.Sprintf("%v -> %v", last, l.SessionSpent))
				mu.Unlock()
			}
			last = l.SessionSpent
		}
	}()
	return func() []string {
		close(done)
		<-finished
		mu.Lock()
		defer mu.Unlock()
		return drops
	}
}

// TestResetViaAStandbyIsTheOwnersAndSpendNeverDrops: the owner trips its
// $2 session ceiling. A reset sent to the standby without budget is
// refused 409 with the owner's numbers; with budget it lifts the owner's
// halt. The stored spend never decreases. On the old code the standby
// reset its own never-restored ledger ($0 spent): 200, and the stored
// spend went from 2 to 0 and the trip disappeared.
func TestResetViaAStandbyIsTheOwnersAndSpendNeverDrops(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, priced, "", "")
	r1 := c.reps["r1"]
	st := c.reps["r2"].w.Store()
	stop := watchSpend(t, st)

	r1.publish("agents.triage.inbox", "one")
	wait.Within(t, deadline, "the first turn", func() bool { return r1.agent().Status().Turns == 1 && r1.agent().State() == driver.Sleeping })
	r1.publish("agents.triage.inbox", "two")
	wait.Within(t, deadline, "the owner halted at $2", func() bool { return r1.agent().State() == driver.Halted })
	if l := readLedger(t, st); l.SessionSpent != 2 || l.Trip == nil || l.Trip.Guardrail != guard.Session {
		t.Fatalf("stored ledger %s", l.raw)
	}

	code, body := c.call("r2", http.MethodPost, "/v1/agents/triage/guardrails/reset", `{"guardrail": "session_usd"}`)
	var refusal struct {
		Error     string  `json:"error"`
		Guardrail string  `json:"guardrail"`
		Spent     float64 `json:"spent_usd"`
		Ceiling   float64 `json:"ceiling_usd"`
		MinAdd    float64 `json:"min_add_budget_usd"`
	}
	if code != http.StatusConflict || json.Unmarshal(body, &refusal) != nil || refusal.Guardrail != guard.Session ||
		refusal.Spent != 2 || refusal.Ceiling != 2 || refusal.MinAdd != 0.01 || !strings.Contains(refusal.Error, "spent $2 against a ceiling of $2") {
		t.Fatalf("reset without budget via r2: %d %s", code, body)
	}
	if l := readLedger(t, st); l.SessionSpent != 2 || l.Trip == nil {
		t.Fatalf("a refused reset changed the stored ledger: %s", l.raw)
	}
	if r1.agent().State() != driver.Halted {
		t.Fatal("a refused reset reopened the owner")
	}

	code, body = c.call("r2", http.MethodPost, "/v1/agents/triage/guardrails/reset", `{"guardrail": "session_usd", "add_budget_usd": 5}`)
	var res guard.ResetResult
	if code != http.StatusOK || json.Unmarshal(body, &res) != nil || !res.Cleared || res.SpentUSD != 2 || res.CeilingUSD != 7 {
		t.Fatalf("reset with budget via r2: %d %s", code, body)
	}
	wait.Within(t, deadline, "the owner reopened", func() bool { return r1.agent().State() != driver.Halted })
	if l := readLedger(t, st); l.SessionSpent < 2 || l.SessionAdded != 5 || l.Trip != nil {
		t.Fatalf("stored ledger after the reset: %s", l.raw)
	}
	// The halted turn's message ("two") runs again now, and "three" after
	// it (or with it): the owner charges on, and stores what it charges.
	r1.publish("agents.triage.inbox", "three")
	wait.Within(t, deadline, "the owner handled the next message and stored its spend", func() bool {
		s := r1.agent().Status()
		g, _ := r1.w.Guard().Status("triage")
		return strings.Contains(c.recs["r1"].all(), "three") && s.State == driver.Sleeping && s.InboxPending == 0 &&
			g.Session.SpentUSD >= 3 && readLedger(t, st).SessionSpent == g.Session.SpentUSD
	})
	if drops := stop(); len(drops) > 0 {
		t.Fatalf("the stored spend decreased: %v", drops)
	}
}

// TestAStandbyNeverWritesAnOwnedAgentsState: on a standby, in-process
// writes to the agent's durable state — a guardrail reset, a pause and a
// resume, a timer — are refused and leave the owner's stored state as it
// was. On the old code each of them wrote over it.
func TestAStandbyNeverWritesAnOwnedAgentsState(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, priced, "", "")
	r1, r2 := c.reps["r1"], c.reps["r2"]
	st := r2.w.Store()
	ctx := t.Context()
	r1.publish("agents.triage.inbox", "one")
	wait.Within(t, deadline, "the first turn stored", func() bool {
		e, err := st.Get(ctx, "guard.triage")
		return err == nil && bytes.Contains(e.Value, []byte(`"session_spent_usd":1`)) && r1.agent().State() == driver.Sleeping
	})
	ledger := readLedger(t, st)
	timer, timerErr := st.Get(ctx, "timer.triage")

	if _, err := r2.w.Guard().Reset("triage", guard.Session, 100); !errors.Is(err, guard.ErrNotOwner) {
		t.Fatalf("a standby's reset: %v", err)
	}
	r2.agent().Pause()
	r2.agent().Interrupt(true)
	r2.w.Driver().Scheduler().SetTimer("triage", time.Now().Add(time.Hour), false)

	if l := readLedger(t, st); l.rev != ledger.rev {
		t.Fatalf("the standby wrote the ledger:\nbefore %s\nafter  %s", ledger.raw, l.raw)
	}
	if _, err := st.Get(ctx, "agent.triage.paused"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the standby stored a pause of the owner's agent: %v", err)
	}
	now, nowErr := st.Get(ctx, "timer.triage")
	if (timerErr == nil) != (nowErr == nil) || now.Revision != timer.Revision {
		t.Fatalf("the standby wrote the timer: %+v %v -> %+v %v", timer, timerErr, now, nowErr)
	}
	if r1.agent().Status().Paused {
		t.Fatal("the owner is paused")
	}
}

// TestVerbsAnswer503WhenNoReplicaOwnsTheAgent: r1, the owner, dies
// abruptly (its NATS connection drops: no control subscription, no lease
// renewal) and its lease stays fresh, so r2 cannot own the agent yet.
// Verbs and the agent's view on r2 answer 503 "no replica owns agent
// triage right now" within the control timeout and do nothing; the list
// shows the agent unknown. On the old code r2 answered 200 "paused"
// about its own idle copy.
func TestVerbsAnswer503WhenNoReplicaOwnsTheAgent(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, "", "", "")
	r1, r2 := c.reps["r1"], c.reps["r2"]
	r1.w.NATS().NC.Close()

	for _, req := range []struct{ method, path, body string }{
		{http.MethodPost, "/v1/agents/triage/pause", ""},
		{http.MethodPost, "/v1/agents/triage/guardrails/reset", `{"guardrail": "session_usd", "add_budget_usd": 1}`},
		{http.MethodGet, "/v1/agents/triage", ""},
	} {
		began := time.Now()
		code, body := c.call("r2", req.method, req.path, req.body)
		took := time.Since(began)
		var e struct{ Error string }
		if code != http.StatusServiceUnavailable || json.Unmarshal(body, &e) != nil || !strings.HasPrefix(e.Error, `no replica owns agent "triage" right now (`) {
			t.Fatalf("%s %s on r2 without an owner: %d %s", req.method, req.path, code, body)
		}
		if took > 3*time.Second {
			t.Fatalf("%s %s took %v, beyond the 2s control timeout", req.method, req.path, took)
		}
	}
	if r2.agent().Status().Paused {
		t.Fatal("r2 paused its standby copy")
	}
	code, body := c.call("r2", http.MethodGet, "/v1/agents", "")
	if code != http.StatusOK || !strings.Contains(string(body), `"state":"unknown"`) || !strings.Contains(string(body), "no replica owns agent") {
		t.Fatalf("list without an owner: %d %s", code, body)
	}
	r1.nc.Close()
	r1.w.Stop(t.Context())
	r1.w = nil
}

// TestViewCountsTheOwnersSubagents: the owner's turn spawns a subagent
// that keeps running; every replica's view counts it (subagents_running
// 1). On the old code the view always said 0.
func TestViewCountsTheOwnersSubagents(t *testing.T) {
	t.Parallel()
	spawn := `[{call: {name: spawn_subagent, args: {task: "watch the queue"}}}, {text: "spawned"}]`
	c := newCluster(t, 2, spawn, "    tools: [spawn_subagent, report_done]\n    subagents: {model: slow}",
		"  slow:\n    provider: scripted\n    script: [{hang: true}]")
	// The subagent never finishes by itself: stop with a short grace
	// (cleanups run last first, so this runs before start's).
	t.Cleanup(func() {
		for _, r := range c.reps {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			r.stopWithin(ctx)
			cancel()
		}
	})
	c.reps["r1"].publish("agents.triage.inbox", "spawn one")
	for _, h := range []string{"r1", "r2"} {
		wait.Within(t, deadline, "a running subagent in "+h+"'s view", func() bool { return c.view(h)["subagents_running"] == 1.0 })
	}
}
