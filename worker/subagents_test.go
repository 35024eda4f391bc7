package worker

// Subagents run anywhere: replicas of one agent ("triage", pinned to r1 by
// replica_affinity so r1 owns it) on one external nats-server, whose
// subagents run as jobs on whichever replica has room.

import (
	"context"
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
	"google.golang.org/adk/model"

	"github.com/agent-worker/agent-worker/background"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/models/scripted"
	"github.com/agent-worker/agent-worker/seal"
	"github.com/agent-worker/agent-worker/store"
)

// subReplica is one replica in these tests: its parent model's recorder
// (prompts of triage's turns, when it owns triage) and its subagent
// model's (the subagents it runs).
type subReplica struct {
	*running
	name string
	sub  *recorder
}

// subSetup is the replicas' shared config.
type subSetup struct {
	parent string // the parent model's script (flow YAML list)
	sub    string // the subagent model's script
	agent  string // YAML appended to the agent, indented 4
}

// subConfig is replica holder's config: subagents.max_per_replica max; the
// parent model "boss" is unpriced, the subagent model "sub" costs $1 per
// 100k input tokens.
func subConfig(t *testing.T, natsURL, holder string, maxPerReplica int, s subSetup) *config.Config {
	t.Helper()
	y := fmt.Sprintf(sealLine()+`data_dir: %s
shutdown_grace: 5s
api: {listen: "127.0.0.1:0"}
nats: {url: %q, ack_wait: 1s, max_message_bytes: 4096}
lease: {holder: %s, ttl: 60s}
subagents: {max_per_replica: %d}
pricing:
  sub: {input_per_mtok: 10}
models:
  boss:
    provider: scripted
    script: %s
  sub:
    provider: scripted
    script: %s
    loop: true
agents:
  - name: triage
    model: boss
    replica_affinity: r1
    tools: [spawn_subagent, stop_subagent]
%s
`, t.TempDir(), natsURL, holder, maxPerReplica, s.parent, s.sub, s.agent)
	if !strings.Contains(s.agent, "subagents:") {
		y += "    subagents: {model: sub}\n"
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

// startSubReplica starts replica holder; hold makes its subagents' model
// calls wait until released (closed) or cancelled.
func startSubReplica(t *testing.T, natsURL, holder string, maxPerReplica int, s subSetup, hold chan struct{}) *subReplica {
	t.Helper()
	parent, sub := newRecorder(), newRecorder()
	sub.hold = hold
	w, err := Start(context.Background(), subConfig(t, natsURL, holder, maxPerReplica, s), Options{
		Models: func(_ string, def config.Model) (model.LLM, error) {
			rec := parent
			if def.Model == "sub" {
				rec = sub
			}
			return scripted.New(def.Model, def, scripted.WithHook(rec.hook))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &running{t: t, w: w, rec: parent, sub: w.Events().Subscribe(10000, nil)}
	r.nc, _, err = w.NATS().Dial("test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.stop)
	return &subReplica{running: r, name: holder, sub: sub}
}

// subCluster starts an external nats-server, r1 (the owner, which runs
// no subagents) and the runners r2.. (one subagent each), and waits
// until r1 owns triage.
func subCluster(t *testing.T, runners int, s subSetup, hold bool) (owner *subReplica, rs []*subReplica) {
	t.Helper()
	port, dir := freePort(t), t.TempDir()
	ns := runServer(t, port, dir)
	t.Cleanup(ns.Shutdown)
	owner = startSubReplica(t, ns.ClientURL(), "r1", 0, s, nil)
	for i := range runners {
		var h chan struct{}
		if hold {
			h = make(chan struct{})
		}
		rs = append(rs, startSubReplica(t, ns.ClientURL(), fmt.Sprintf("r%d", i+2), 1, s, h))
	}
	wait.Within(t, deadline, "r1 owns triage, the others stand by", func() bool {
		if owner.agent().Status().Standby {
			return false
		}
		for _, r := range rs {
			if !r.agent().Status().Standby {
				return false
			}
		}
		return true
	})
	return owner, rs
}

func spawnStep(task string) string {
	return fmt.Sprintf(`{call: {name: spawn_subagent, args: {task: %q}}}`, task)
}

// api calls r's operator API.
func (r *subReplica) api(method, path string) (int, []byte) {
	r.t.Helper()
	req, err := http.NewRequest(method, "http://"+r.w.APIAddr()+path, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// subagents is GET /v1/agents/triage/subagents on r.
func (r *subReplica) subagents() subagentList {
	r.t.Helper()
	code, body := r.api(http.MethodGet, "/v1/agents/triage/subagents")
	var l subagentList
	if code != http.StatusOK || json.Unmarshal(body, &l) != nil {
		r.t.Fatalf("GET subagents on %s: %d %s", r.name, code, body)
	}
	return l
}

// subagentList is api.SubagentList as a client reads it.
type subagentList struct {
	Agent     string            `json:"agent"`
	Running   int               `json:"running"`
	Subagents []background.Info `json:"subagents"`
}

// info returns subagent id's entry in l.
func (l subagentList) info(id string) (background.Info, bool) {
	for _, i := range l.Subagents {
		if i.ID == id {
			return i, true
		}
	}
	return background.Info{}, false
}

// waitEventWith returns the next event of type typ for which ok holds.
func (r *subReplica) waitEventWith(typ string, ok func(events.Event) bool) events.Event {
	r.t.Helper()
	return wait.Event(r.t, deadline, r.running.sub, "a "+typ+" event on "+r.name, func(e events.Event) bool { return e.Type == typ && ok(e) })
}

func subagentID(id string) func(events.Event) bool {
	return func(e events.Event) bool { return e.Data["id"] == id }
}

// ledger reads triage's guardrail ledger from the shared store.
func ledger(t *testing.T, r *subReplica) float64 {
	t.Helper()
	var st struct {
		SessionSpent float64 `json:"session_spent_usd"`
	}
	if _, err := store.GetJSON(t.Context(), r.w.Store(), "guard.triage", &st); err != nil {
		t.Fatal(err)
	}
	return st.SessionSpent
}

// TestSubagentRunsOnAnotherReplicaAndReportsToItsParent: r1 owns triage
// but runs no subagents (max_per_replica 0); the subagent triage spawns
// runs on r2, and its report reaches triage's next turn on r1 through
// NATS, waking it with source subagent. Every replica lists it, with r2
// as its replica; r2 counts it completed; its $1 is charged to triage.
func TestSubagentRunsOnAnotherReplicaAndReportsToItsParent(t *testing.T) {
	t.Parallel()
	s := subSetup{
		parent: `[` + spawnStep("count the widgets in warehouse 7") + `, {text: "waiting for the count"}, {text: "42 it is"}]`,
		sub:    `[{text: "42 widgets", usage: {input: 100000}}]`,
	}
	r1, rs := subCluster(t, 1, s, false)
	r2 := rs[0]
	r1.publish("agents.triage.inbox", "how many widgets?")

	r2.waitEventWith(background.EventStarted, subagentID("triage-sub-1"))
	if e := r2.waitEventWith(background.EventFinished, subagentID("triage-sub-1")); e.Data["outcome"] != background.OutcomeCompleted || e.Data["replica"] != "r2" {
		t.Fatalf("finished on r2: %v", e.Data)
	}
	wake := `[wake: subagent "triage-sub-1" reported]`
	wait.Within(t, deadline, "triage's turn woken by the report", func() bool { return strings.Contains(r1.rec.all(), wake) })
	report := r1.rec.all()[strings.Index(r1.rec.all(), wake):]
	for _, want := range []string{"  source: subagent:triage-sub-1", "Subagent triage-sub-1 completed.", "Task: count the widgets in warehouse 7", "> Result:\n> 42 widgets"} {
		if !strings.Contains(report, want) {
			t.Errorf("the report turn's prompt lacks %q:\n%s", want, report)
		}
	}
	if n := r1.sub.calls(); n != 0 {
		t.Errorf("r1 (max_per_replica 0) ran %d subagent model calls", n)
	}
	if n := r2.sub.calls(); n != 1 {
		t.Errorf("r2 ran %d subagent model calls, want 1", n)
	}
	wait.Within(t, deadline, "the $1 charged to triage's ledger", func() bool { return ledger(t, r1) == 1 })
	for _, r := range []*subReplica{r1, r2} {
		var l subagentList
		wait.Within(t, deadline, "the spend listed on "+r.name, func() bool {
			l = r.subagents()
			i, _ := l.info("triage-sub-1")
			return i.SpentUSD == 1
		})
		i, ok := l.info("triage-sub-1")
		if !ok || i.Replica != "r2" || i.State != background.OutcomeCompleted || i.Runs != 1 || i.Started == nil ||
			!strings.HasPrefix(i.Task, "count the widgets") || l.Running != 0 {
			t.Errorf("GET subagents on %s: %+v", r.name, l)
		}
	}
	with := map[string]string{"agent": "triage", "outcome": background.OutcomeCompleted}
	if got := value(t, scrape(t, r2.running), "agent_worker_subagents_total", with); got != 1 {
		t.Errorf("r2 subagents_total{completed} = %v, want 1", got)
	}
	if got := value(t, scrape(t, r1.running), "agent_worker_subagents_total", with); got != 0 {
		t.Errorf("r1 subagents_total{completed} = %v, want 0 (it ran none)", got)
	}
	if got := value(t, scrape(t, r1.running), "agent_worker_subagents_running", map[string]string{"agent": "triage"}); got != 0 {
		t.Errorf("r1 subagents_running = %v after it finished", got)
	}
}

// TestSubagentOfAKilledReplicaRunsAgain: the replica running a subagent
// (r2 or r3, whichever took the job) loses NATS abruptly mid-run; its job
// is delivered again after ack_wait to the other runner, which runs it
// (run 2) to completion; the parent gets one report and the survivor
// counts it completed.
func TestSubagentOfAKilledReplicaRunsAgain(t *testing.T) {
	t.Parallel()
	s := subSetup{
		parent: `[` + spawnStep("scan the logs") + `, {text: "waiting"}, {text: "thanks"}]`,
		sub:    `[{text: "no errors in the logs", usage: {input: 100000}}]`,
	}
	r1, rs := subCluster(t, 2, s, true)
	r1.publish("agents.triage.inbox", "scan the logs please")
	var victim, survivor *subReplica
	wait.Within(t, deadline, "a runner holds the subagent's model call", func() bool {
		for i, r := range rs {
			if r.sub.calls() > 0 {
				victim, survivor = r, rs[1-i]
				return true
			}
		}
		return false
	})
	if l := r1.subagents(); len(l.Subagents) != 1 || l.Subagents[0].Replica != victim.name || l.Subagents[0].State != background.StateRunning || l.Running != 1 {
		t.Fatalf("before the kill: %+v", l)
	}
	close(survivor.sub.hold) // the run elsewhere completes
	victim.w.NATS().NC.Close()
	victim.nc.Close()

	e := survivor.waitEventWith(background.EventStarted, subagentID("triage-sub-1"))
	if e.Data["run"] != 2 {
		t.Errorf("run again on %s: %v, want run 2", survivor.name, e.Data)
	}
	if e := survivor.waitEventWith(background.EventFinished, subagentID("triage-sub-1")); e.Data["outcome"] != background.OutcomeCompleted {
		t.Fatalf("finished on %s: %v", survivor.name, e.Data)
	}
	wake := `[wake: subagent "triage-sub-1" reported]`
	wait.Within(t, deadline, "triage's turn woken by the report", func() bool { return strings.Contains(r1.rec.all(), wake) })
	if !strings.Contains(r1.rec.all(), "no errors in the logs") {
		t.Errorf("the report lacks the result:\n%s", r1.rec.all())
	}
	i, _ := r1.subagents().info("triage-sub-1")
	t.Logf("killed %s; %s ran it again: %+v", victim.name, survivor.name, i)
	if i.State != background.OutcomeCompleted || i.Replica != survivor.name || i.Runs != 2 {
		t.Errorf("after the re-run: %+v", i)
	}
	with := map[string]string{"agent": "triage", "outcome": background.OutcomeCompleted}
	if got := value(t, scrape(t, survivor.running), "agent_worker_subagents_total", with); got != 1 {
		t.Errorf("%s subagents_total{completed} = %v, want 1", survivor.name, got)
	}
	if got := value(t, scrape(t, survivor.running), "agent_worker_subagent_reruns_total", map[string]string{"agent": "triage"}); got != 1 {
		t.Errorf("%s subagent_reruns_total = %v, want 1", survivor.name, got)
	}
	// The victim's run is still waiting on its model: release it and stop
	// with no drain; it cannot report (no NATS) and hands nothing back.
	close(victim.sub.hold)
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	victim.stopWithin(expired)
	if n := strings.Count(r1.rec.all(), wake); n != 1 {
		t.Errorf("triage woke %d times for the report, want once", n)
	}
}

// TestHaltedParentStopsItsRemoteSubagentAndIsChargedOnce: triage's
// session ceiling is $2.50; its subagent on r2 spends $1 a model call
// until r1, applying the charges, trips the ceiling and halts triage. r2
// stops the subagent within seconds ("stopped: parent halted"), and the
// ledger in the store holds exactly what the subagent spent; a charge
// record sent again is ignored.
func TestHaltedParentStopsItsRemoteSubagentAndIsChargedOnce(t *testing.T) {
	t.Parallel()
	s := subSetup{
		parent: `[` + spawnStep("keep counting") + `, {text: "waiting"}]`,
		sub:    `[{call: {name: report_done, args: {summary: "counted some"}}, usage: {input: 100000}}]`,
		agent:  "    budgets: {session_usd: 2.5}\n    subagents: {model: sub, tools: [report_done]}",
	}
	r1, rs := subCluster(t, 1, s, false)
	r2 := rs[0]
	reports, err := r1.nc.SubscribeSync("agents.triage.inbox")
	if err != nil {
		t.Fatal(err)
	}
	r1.publish("agents.triage.inbox", "count")

	trip := r1.waitEventWith(guard.EventTripped, func(events.Event) bool { return true })
	fin := r2.waitEventWith(background.EventFinished, subagentID("triage-sub-1"))
	if fin.Data["outcome"] != background.OutcomeStopped {
		t.Fatalf("finished: %v", fin.Data)
	}
	if took := fin.Time.Sub(trip.Time); took > 5*time.Second {
		t.Errorf("the subagent stopped %v after its parent was halted", took)
	}
	var report string
	for end := time.Now().Add(deadline); report == "" && time.Now().Before(end); {
		m, err := reports.NextMsg(time.Until(end))
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Get(nats.MsgIdHdr) == "triage/triage-sub-1" { // natsbus.MsgID(parent, id)
			report = string(m.Data)
			if m.Header.Get("Agent-Worker-Via") != "subagent" {
				t.Errorf("report headers %v", m.Header)
			}
		}
	}
	if !strings.Contains(report, "Subagent triage-sub-1 stopped: parent halted") {
		t.Errorf("report %s", report)
	}
	spent := fin.Data["cost_usd"].(float64)
	if spent < 3 {
		t.Fatalf("the subagent spent $%v, want at least the $3 that cross $2.50", spent)
	}
	wait.Within(t, deadline, "every charge applied", func() bool { return ledger(t, r1) == spent })
	t.Logf("halted by %q; the subagent stopped %v later, having spent $%v, all in the ledger", trip.Data["reason"], fin.Time.Sub(trip.Time), spent)
	wait.Within(t, deadline, "the spend listed", func() bool {
		i, _ := r1.subagents().info("triage-sub-1")
		return i.SpentUSD == spent && i.State == background.OutcomeStopped && i.Replica == "r2"
	})

	// The first charge again (republished by a replica: sealed with the
	// deployment's key): the stream knows its Nats-Msg-Id; with another id
	// it reaches the owner, which has charged it already.
	key, _, _, err := seal.LoadLocal(sharedSealFile())
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg("agents._subagents.charges.triage")
	msg.Data = []byte(`{"parent": "triage", "id": "triage-sub-1", "run": 1, "call": 1, "usd": 1}`)
	msg.Header.Set(nats.MsgIdHdr, "charge-triage-sub-1-1-1")
	key.SealMsg(msg, nats.MsgIdHdr)
	ack, err := r1.w.NATS().JS.PublishMsg(t.Context(), msg)
	if err != nil || !ack.Duplicate {
		t.Fatalf("republished charge: %+v %v, want a duplicate", ack, err)
	}
	msg.Header.Set(nats.MsgIdHdr, "charge-again")
	key.SealMsg(msg, nats.MsgIdHdr)
	if _, err := r1.w.NATS().JS.PublishMsg(t.Context(), msg); err != nil {
		t.Fatal(err)
	}
	dup := r1.waitEventWith(background.EventChargeDuplicate, subagentID("triage-sub-1"))
	if dup.Data["call"] != 1 {
		t.Errorf("duplicate %v", dup.Data)
	}
	if got := ledger(t, r1); got != spent {
		t.Errorf("ledger $%v after a duplicate charge, want $%v", got, spent)
	}
	if r1.agent().Status().State != "halted" {
		t.Errorf("triage: %+v", r1.agent().Status())
	}
}

// TestSubagentsListedAndStoppedFromAnyReplica: two hanging subagents of
// triage run on r2. Every replica lists them (replica r2, running) and
// counts them; stop_subagent in triage's turn on r1 stops one, the API's
// stop on r2 the other; both report stopped, and a second stop is 409.
func TestSubagentsListedAndStoppedFromAnyReplica(t *testing.T) {
	t.Parallel()
	s := subSetup{
		parent: `[` + spawnStep("watch queue A") + `, ` + spawnStep("watch queue B") + `, {text: "two watchers"}, ` +
			`{call: {name: stop_subagent, args: {id: triage-sub-1}}}, {text: "stopped A"}, {text: "ok"}, {text: "ok"}, {text: "ok"}]`,
		sub: `[{hang: true}]`,
	}
	port, dir := freePort(t), t.TempDir()
	ns := runServer(t, port, dir)
	t.Cleanup(ns.Shutdown)
	r1 := startSubReplica(t, ns.ClientURL(), "r1", 0, s, nil)
	r2 := startSubReplica(t, ns.ClientURL(), "r2", 2, s, nil)
	wait.Within(t, deadline, "r1 owns triage", func() bool { return !r1.agent().Status().Standby && r2.agent().Status().Standby })
	r1.publish("agents.triage.inbox", "watch both queues")
	wait.Within(t, deadline, "both running on r2", func() bool { return r2.sub.calls() == 2 })
	for _, r := range []*subReplica{r1, r2} {
		l := r.subagents()
		for _, id := range []string{"triage-sub-1", "triage-sub-2"} {
			if i, ok := l.info(id); !ok || i.Replica != "r2" || i.State != background.StateRunning {
				t.Errorf("GET subagents on %s: %s: %+v", r.name, id, i)
			}
		}
		if l.Running != 2 || r.w.subagents.Running("triage") != 2 {
			t.Errorf("%s counts %d (manager %d), want 2", r.name, l.Running, r.w.subagents.Running("triage"))
		}
		var view struct {
			SubagentsRunning int `json:"subagents_running"`
		}
		if code, body := r.api(http.MethodGet, "/v1/agents/triage"); code != http.StatusOK || json.Unmarshal(body, &view) != nil || view.SubagentsRunning != 2 {
			t.Errorf("GET /v1/agents/triage on %s: %d %s", r.name, code, body)
		}
	}
	if got := value(t, scrape(t, r1.running), "agent_worker_subagents_running", map[string]string{"agent": "triage"}); got != 2 {
		t.Errorf("r1 subagents_running = %v, want 2", got)
	}

	r1.publish("agents.triage.inbox", "stop watching A")
	if e := r2.waitEventWith(background.EventFinished, subagentID("triage-sub-1")); e.Data["outcome"] != background.OutcomeStopped {
		t.Fatalf("sub-1: %v", e.Data)
	}
	began := time.Now()
	if code, body := r2.api(http.MethodPost, "/v1/agents/triage/subagents/triage-sub-2/stop"); code != http.StatusAccepted {
		t.Fatalf("stop on r2: %d %s", code, body)
	}
	if e := r2.waitEventWith(background.EventFinished, subagentID("triage-sub-2")); e.Data["outcome"] != background.OutcomeStopped {
		t.Fatalf("sub-2: %v", e.Data)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("the API's stop took %v", took)
	} else {
		t.Logf("the API's stop on r2 stopped the subagent in %v", took)
	}
	for _, want := range []string{"Subagent triage-sub-1 stopped by its parent.", "Subagent triage-sub-2 stopped by operator (token anonymous)."} {
		wait.Within(t, deadline, "triage told: "+want, func() bool { return strings.Contains(r1.rec.all(), want) })
	}
	if code, body := r1.api(http.MethodPost, "/v1/agents/triage/subagents/triage-sub-2/stop"); code != http.StatusConflict {
		t.Errorf("second stop: %d %s", code, body)
	}
	if code, body := r1.api(http.MethodPost, "/v1/agents/triage/subagents/triage-sub-9/stop"); code != http.StatusNotFound {
		t.Errorf("stop of an unknown subagent: %d %s", code, body)
	}
	l := r1.subagents()
	if i, _ := l.info("triage-sub-2"); i.State != background.OutcomeStopped || i.StopRequestedBy != "operator (token anonymous)" || l.Running != 0 {
		t.Errorf("after the stops: %+v", l)
	}
}
