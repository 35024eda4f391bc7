package worker

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/adk/model"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/models/scripted"
)

// fleet is replicas of a worker sharing one external nats-server (its
// JetStream for input, its KV for state and leases), all running the same
// agents on a scripted model whose every call takes turnDelay.
type fleet struct {
	tb      testing.TB
	url     string
	agents  []string
	ackWait string
	js      jetstream.JetStream
	// lease is the lease section; default ttl 3s, heartbeat 200ms.
	lease string
	// store is store.url; default the KV buckets on the fleet's NATS.
	store string
	// delay is how long each model call takes; default turnDelay.
	delay string

	mu        sync.Mutex
	reps      map[string]*fleetReplica
	seq       int
	published map[string]time.Time     // message id → when published
	handled   map[string][]handledBy   // message id → the turns that handled it
	failed    []failedTurn             // failed turns on live replicas
	moves     map[string][]ownerChange // agent → ownership events
}

type fleetReplica struct {
	holder string
	w      *Worker
	sub    *events.Subscription
	done   chan struct{}
	dead   bool // killed: its events no longer count
}

type handledBy struct {
	at     time.Time
	holder string
}

type failedTurn struct {
	at                          time.Time
	holder, agent, outcome, err string
}

type ownerChange struct {
	at     time.Time
	holder string
	owned  bool
}

const turnDelay = "700ms"

func natsExternal(tb testing.TB) string {
	tb.Helper()
	return startNATSServer(tb, &server.Options{ServerName: "external", Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: tb.TempDir(), NoSigs: true, NoLog: true}).ClientURL()
}

// startNATSServer runs a nats-server with opts in the test's process
// until the test ends.
func startNATSServer(tb testing.TB, opts *server.Options) *server.Server {
	tb.Helper()
	ns, err := server.NewServer(opts)
	if err != nil {
		tb.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		tb.Fatal("nats-server not ready")
	}
	tb.Cleanup(ns.Shutdown)
	return ns
}

func newFleet(tb testing.TB, agents int, ackWait string) *fleet {
	c := &fleet{tb: tb, url: natsExternal(tb), ackWait: ackWait, reps: map[string]*fleetReplica{},
		published: map[string]time.Time{}, handled: map[string][]handledBy{}, moves: map[string][]ownerChange{}}
	for i := range agents {
		c.agents = append(c.agents, fmt.Sprintf("a%02d", i))
	}
	nc, err := nats.Connect(c.url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	if c.js, err = jetstream.New(nc); err != nil {
		tb.Fatal(err)
	}
	return c
}

func (c *fleet) config(holder string) *config.Config {
	var b strings.Builder
	fmt.Fprintf(&b, sealLine()+`data_dir: %s
shutdown_grace: 10s
api: {listen: "127.0.0.1:0"}
nats: {url: %q, ack_wait: %s}
store: {url: %q}
lease: {holder: %s, %s}
models:
  fake:
    provider: scripted
    script: [{text: "noted", delay: %s, usage: {input: 100, output: 10}}]
    loop: true
agents:
`, c.tb.TempDir(), c.url, c.ackWait, cmp.Or(c.store, "nats://"), holder, cmp.Or(c.lease, "ttl: 3s, heartbeat: 200ms"), cmp.Or(c.delay, turnDelay))
	for _, a := range c.agents {
		fmt.Fprintf(&b, "  - {name: %s, model: fake, tools: [report_done]}\n", a)
	}
	p := filepath.Join(c.tb.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		c.tb.Fatal(err)
	}
	cfg, err := config.Load(p)
	if err != nil {
		c.tb.Fatalf("config: %v\n%s", err, b.String())
	}
	return cfg
}

// start starts a replica named holder (again, after a kill).
func (c *fleet) start(holder string) *fleetReplica {
	c.tb.Helper()
	w, err := Start(context.Background(), c.config(holder), Options{
		Models: func(_ string, def config.Model) (model.LLM, error) { return scripted.New("fake", def) }, Log: debugLog(),
	})
	if err != nil {
		c.tb.Fatal(err)
	}
	r := &fleetReplica{holder: holder, w: w, done: make(chan struct{}),
		sub: w.Events().Subscribe(1<<16, func(e events.Event) bool {
			return e.Type == events.TurnCompleted || e.Type == events.TurnFailed || e.Type == events.Ownership
		})}
	go c.collect(r)
	c.mu.Lock()
	c.reps[holder] = r
	c.mu.Unlock()
	c.tb.Cleanup(func() { c.stop(r) })
	return r
}

func (c *fleet) collect(r *fleetReplica) {
	defer close(r.done)
	for e := range r.sub.C {
		c.mu.Lock()
		dead := r.dead
		switch {
		case dead:
		case e.Type == events.TurnCompleted:
			ids, _ := e.Data["ids"].([]string)
			for _, id := range ids {
				c.handled[id] = append(c.handled[id], handledBy{at: e.Time, holder: r.holder})
			}
		case e.Type == events.TurnFailed:
			c.failed = append(c.failed, failedTurn{at: e.Time, holder: r.holder, agent: e.Agent,
				outcome: fmt.Sprint(e.Data["outcome"]), err: fmt.Sprint(e.Data["error"])})
		case e.Type == events.Ownership:
			owned, _ := e.Data["owned"].(bool)
			c.moves[e.Agent] = append(c.moves[e.Agent], ownerChange{at: e.Time, holder: r.holder, owned: owned})
		}
		c.mu.Unlock()
	}
}

func (c *fleet) stop(r *fleetReplica) {
	if r.w == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	r.w.Stop(ctx)
	r.sub.Close()
	<-r.done
	r.w = nil
}

// kill makes a replica die as far as the others can tell: its NATS
// connection — its heartbeats, its consumers and, with store nats://, its
// lease renewals — is cut at once. Nothing is released.
func (c *fleet) kill(holder string) {
	c.mu.Lock()
	r := c.reps[holder]
	r.dead = true
	delete(c.reps, holder)
	c.mu.Unlock()
	r.w.NATS().NC.Close()
}

// live returns the live replicas, by name.
func (c *fleet) live() []*fleetReplica {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*fleetReplica
	for _, r := range c.reps {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].holder < out[j].holder })
	return out
}

// owners maps each agent to the live replicas that own it (not standby).
func (c *fleet) owners() map[string][]string {
	out := map[string][]string{}
	for _, r := range c.live() {
		for _, a := range r.w.Driver().Agents() {
			if !a.Standby() {
				out[a.Name()] = append(out[a.Name()], r.holder)
			}
		}
	}
	return out
}

// spread reports, when every agent has exactly one live owner, how many
// each live replica owns.
func (c *fleet) spread() (map[string]int, bool) {
	load := map[string]int{}
	for _, r := range c.live() {
		load[r.holder] = 0
	}
	owners := c.owners()
	for _, a := range c.agents {
		if len(owners[a]) != 1 {
			return load, false
		}
		load[owners[a][0]]++
	}
	return load, true
}

// waitSpread polls until every agent has one live owner and each live
// replica owns between lo and hi; it returns how long that took.
func (c *fleet) waitSpread(what string, within time.Duration, lo, hi int) (map[string]int, time.Duration) {
	c.tb.Helper()
	start := time.Now()
	end := start.Add(within)
	for {
		load, ok := c.spread()
		if ok {
			for _, n := range load {
				if n < lo || n > hi {
					ok = false
				}
			}
		}
		if ok {
			return load, time.Since(start)
		}
		if time.Now().After(end) {
			c.tb.Fatalf("%s: not spread within %v: load %v, owners %v", what, within, load, c.owners())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// publish sends one message to agent through JetStream with a unique id.
func (c *fleet) publish(agent string) string {
	c.mu.Lock()
	c.seq++
	id := fmt.Sprintf("m%05d-%s", c.seq, agent)
	c.mu.Unlock()
	msg := nats.NewMsg("agents." + agent + ".inbox")
	msg.Header.Set(nats.MsgIdHdr, id)
	msg.Data = []byte("check " + id)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	now := time.Now()
	if _, err := c.js.PublishMsg(ctx, msg); err != nil {
		c.tb.Errorf("publish %s: %v", id, err)
		return id
	}
	c.mu.Lock()
	c.published[id] = now
	c.mu.Unlock()
	return id
}

// waitHandled waits until every message of ids was handled by a
// completed turn.
func (c *fleet) waitHandled(t *testing.T, what string, ids []string) {
	t.Helper()
	wait.Within(t, deadline, what, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, id := range ids {
			if len(c.handled[id]) == 0 {
				return false
			}
		}
		return true
	})
}

// waitHandledOnce is waitHandled, then checks none was handled twice.
func (c *fleet) waitHandledOnce(t *testing.T, what string, ids []string) {
	t.Helper()
	c.waitHandled(t, what, ids)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		if n := len(c.handled[id]); n != 1 {
			t.Errorf("%s handled %d times", id, n)
		}
	}
}

// load publishes one message every gap, round-robin over the agents,
// until stop is closed.
func (c *fleet) load(gap time.Duration, stop <-chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(gap)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-t.C:
				c.publish(c.agents[i%len(c.agents)])
			}
		}
	}()
	return done
}

// metricSeries scrapes a replica's /metrics: each sample's value by its
// series, `name{labels}` (or `name` without labels).
func metricSeries(tb testing.TB, w *Worker) map[string]float64 {
	tb.Helper()
	resp, err := http.Get("http://" + w.APIAddr() + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		series, rest, _ := strings.Cut(line, " ")
		if i := strings.LastIndexByte(line, '}'); i >= 0 {
			series, rest = line[:i+1], line[i+2:]
		}
		v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		if err == nil {
			out[series] += v
		}
	}
	return out
}

// metricSums scrapes a replica's /metrics and sums each family's samples.
func metricSums(tb testing.TB, w *Worker) map[string]float64 {
	tb.Helper()
	out := map[string]float64{}
	for series, v := range metricSeries(tb, w) {
		name, _, _ := strings.Cut(series, "{")
		out[name] += v
	}
	return out
}

// metricLabelSums scrapes a replica's /metrics and sums family name's
// samples by the value of their label.
func metricLabelSums(tb testing.TB, w *Worker, name, label string) map[string]float64 {
	tb.Helper()
	out := map[string]float64{}
	for series, v := range metricSeries(tb, w) {
		labels, ok := strings.CutPrefix(series, name+"{")
		if !ok {
			continue
		}
		_, value, _ := strings.Cut(labels, label+`="`)
		value, _, _ = strings.Cut(value, `"`)
		out[value] += v
	}
	return out
}

// Three replicas divide 30 agents; one dies and the other two take its
// agents within the lease TTL, still evenly; it comes back and takes its
// third again, handed over gracefully: no turn is cancelled and no
// message waits for its ack wait (30s here) to be redelivered.
func TestAgentsSpreadAcrossReplicasAndMoveGracefully(t *testing.T) {
	t.Parallel()
	c := newFleet(t, 30, "30s")
	for _, h := range []string{"r1", "r2", "r3"} {
		c.start(h)
	}
	load, took := c.waitSpread("three replicas", deadline, 7, 13)
	t.Logf("3 replicas: %v (spread %v after the last start)", load, took)
	c.checkMetrics(t, 3)
	c.checkReplicas(t, load)
	for _, r := range c.live() {
		for _, a := range r.w.Driver().Agents() {
			st := a.Status()
			owners := c.owners()[a.Name()]
			if len(owners) != 1 {
				// A lease renewal late on a loaded machine: the agent is
				// moving; whom it names then is checked nowhere.
				t.Logf("%s: moving between replicas (owners %v)", a.Name(), owners)
				continue
			}
			if want := owners[0]; st.Owner != want && !st.Standby {
				t.Errorf("%s on %s: owner %q, want %q", a.Name(), r.holder, st.Owner, want)
			}
		}
	}

	stop := make(chan struct{})
	loaded := c.load(40*time.Millisecond, stop)
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-loaded
	}()
	// Let the load reach every agent before the kill.
	wait.Within(t, deadline, "turns on every fleetReplica", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		seen := map[string]bool{}
		for _, hs := range c.handled {
			for _, h := range hs {
				seen[h.holder] = true
			}
		}
		return len(seen) == 3
	})

	// r3 dies.
	c.kill("r3")
	load, took = c.waitSpread("after r3 died", 3*time.Second+5*time.Second, 12, 18)
	t.Logf("r3 killed: %v owned by the survivors %v after the kill", load, took)

	// r3 comes back while messages keep coming: it is handed its share.
	joined := time.Now()
	c.start("r3")
	load, took = c.waitSpread("after r3 rejoined", deadline, 7, 13)
	t.Logf("r3 rejoined: %v spread %v after its start", load, took)
	load, took = c.waitSpread("converged after r3 rejoined", deadline, 10, 10)
	t.Logf("r3 rejoined: %v, even %v after its start", load, took)
	// Messages published during and after the handovers, for a while.
	settled := time.Now()
	wait.Within(t, deadline, "a second of load after the handovers", func() bool { return time.Since(settled) > time.Second })
	close(stop)
	<-loaded

	// Every message published since r3 rejoined is handled within a few
	// seconds of its publication (an ack-wait redelivery takes 30s).
	var late []string
	c.mu.Lock()
	var joinPhase []string
	for id, at := range c.published {
		if at.After(joined) {
			joinPhase = append(joinPhase, id)
		}
	}
	c.mu.Unlock()
	sort.Strings(joinPhase)
	c.waitHandled(t, "every message of the join phase handled", joinPhase)
	c.mu.Lock()
	worst := time.Duration(0)
	for _, id := range joinPhase {
		hs := c.handled[id]
		if len(hs) > 1 {
			t.Errorf("message %s handled by %d turns: %v", id, len(hs), hs)
		}
		if d := hs[0].at.Sub(c.published[id]); d > worst {
			worst = d
		}
		if d := hs[0].at.Sub(c.published[id]); d > 5*time.Second {
			late = append(late, fmt.Sprintf("%s after %v", id, d))
		}
	}
	var failed []failedTurn
	for _, f := range c.failed {
		if f.at.After(joined) {
			failed = append(failed, f)
		}
	}
	moved := 0
	for _, evs := range c.moves {
		for _, e := range evs {
			if e.at.After(joined) && e.holder != "r3" && !e.owned {
				moved++
			}
		}
	}
	c.mu.Unlock()
	t.Logf("join phase: %d messages, slowest handled %v after its publication; %d agents handed over", len(joinPhase), worst, moved)
	if len(late) > 0 {
		t.Errorf("%d messages of the join phase handled late (ack wait?): %v", len(late), late)
	}
	if len(failed) > 0 {
		t.Errorf("turns failed during the handovers (a handover must let turns finish): %+v", failed)
	}
	if moved < 7 {
		t.Errorf("only %d agents were handed over to r3", moved)
	}
	c.checkMetrics(t, 3)
}

// checkReplicas polls every live replica's GET /v1/replicas until each
// lists every live replica, itself first, owning what load says.
func (c *fleet) checkReplicas(t *testing.T, load map[string]int) {
	t.Helper()
	var last string
	ok := func() bool {
		for _, r := range c.live() {
			resp, err := http.Get("http://" + r.w.APIAddr() + "/v1/replicas")
			if err != nil {
				t.Fatal(err)
			}
			var list api.ReplicaList
			err = json.NewDecoder(resp.Body).Decode(&list)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			last = fmt.Sprintf("%s: %+v", r.holder, list)
			if list.ServedBy != r.holder || len(list.Replicas) != len(load) || !list.Replicas[0].Self || list.Replicas[0].Name != r.holder {
				return false
			}
			for _, rep := range list.Replicas {
				if rep.AgentsOwned != load[rep.Name] {
					return false
				}
			}
		}
		return true
	}
	end := time.Now().Add(deadline)
	for !ok() {
		if time.Now().After(end) {
			t.Fatalf("GET /v1/replicas never showed %v; last %s", load, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkMetrics polls the live replicas' /metrics until the per-agent
// gauges sum to one per agent across them.
func (c *fleet) checkMetrics(t *testing.T, replicas int) {
	t.Helper()
	var last []map[string]float64
	ok := func() bool {
		last = last[:0]
		var state, owned float64
		for _, r := range c.live() {
			m := metricSums(t, r.w)
			last = append(last, m)
			state += m["agent_worker_agent_state"]
			owned += m["agent_worker_agent_owned"]
			if m["agent_worker_replicas"] != float64(replicas) {
				return false
			}
		}
		return state == float64(len(c.agents)) && owned == float64(len(c.agents))
	}
	end := time.Now().Add(deadline)
	for !ok() {
		if time.Now().After(end) {
			var sums []string
			for _, m := range last {
				sums = append(sums, fmt.Sprintf("state %v owned %v replicas %v", m["agent_worker_agent_state"], m["agent_worker_agent_owned"], m["agent_worker_replicas"]))
			}
			t.Fatalf("metrics never summed to one per agent: %v", sums)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// And the ownership counters say what happened.
	var acquired float64
	for _, m := range last {
		acquired += m["agent_worker_ownership_changes_total"]
	}
	if acquired < float64(len(c.agents)) {
		t.Errorf("ownership changes total %v, want at least one acquisition per agent", acquired)
	}
}

// A pinned agent runs on the replica its replica_affinity matches; with
// none live, another takes it once its lease expires, and hands it back
// when a matching replica returns.
func TestPinnedAgentFollowsItsAffinity(t *testing.T) {
	t.Parallel()
	url := natsExternal(t)
	cfg := func(holder string) setup {
		return setup{natsURL: url, top: fmt.Sprintf("lease: {holder: %s, ttl: 3s, heartbeat: 200ms}\n", holder),
			agent: "    replica_affinity: \"blue-*\""}
	}
	red := start(t, writeConfig(t, cfg("red-1")), newRecorder(), nil)
	blue := start(t, writeConfig(t, cfg("blue-1")), newRecorder(), nil)
	wait.Within(t, deadline, "blue-1 owns triage", func() bool { return !blue.agent().Status().Standby && red.agent().Status().Standby })
	if o := red.agent().Status().Owner; o != "blue-1" {
		wait.Within(t, deadline, "red-1 sees blue-1 as the owner", func() bool { return red.agent().Status().Owner == "blue-1" })
	}
	blue.nc.Close()
	blue.w.NATS().NC.Close() // blue-1 dies
	wait.Within(t, deadline, "red-1 takes triage over", func() bool { return !red.agent().Status().Standby })
	blue.w.Stop(context.Background())
	blue.w = nil
	blue2 := start(t, writeConfig(t, cfg("blue-2")), newRecorder(), nil)
	wait.Within(t, deadline, "blue-2 takes triage back", func() bool { return !blue2.agent().Status().Standby && red.agent().Status().Standby })
}

// Standby replicas export no per-agent gauges for agents they do not own.
func TestStandbyReplicaExportsOnlyOwnership(t *testing.T) {
	t.Parallel()
	url := natsExternal(t)
	cfg := func(holder string) setup {
		return setup{natsURL: url, top: fmt.Sprintf("lease: {holder: %s, ttl: 3s, heartbeat: 200ms}\n", holder),
			agent: "    replica_affinity: r1"}
	}
	r1 := start(t, writeConfig(t, cfg("r1")), newRecorder(), nil)
	r2 := start(t, writeConfig(t, cfg("r2")), newRecorder(), nil)
	wait.Within(t, deadline, "r1 owns triage", func() bool { return !r1.agent().Status().Standby && r2.agent().Status().Standby })
	wait.Within(t, deadline, "both see two replicas", func() bool {
		return metricSums(t, r1.w)["agent_worker_replicas"] == 2 && metricSums(t, r2.w)["agent_worker_replicas"] == 2
	})
	m1, m2 := metricSums(t, r1.w), metricSums(t, r2.w)
	if m1["agent_worker_agent_owned"] != 1 || m2["agent_worker_agent_owned"] != 0 {
		t.Errorf("agent_owned: r1 %v r2 %v", m1["agent_worker_agent_owned"], m2["agent_worker_agent_owned"])
	}
	for _, f := range []string{"agent_worker_agent_state", "agent_worker_inbox_pending", "agent_worker_subagents_running"} {
		if _, ok := m2[f]; ok {
			t.Errorf("standby r2 exports %s", f)
		}
		if _, ok := m1[f]; !ok {
			t.Errorf("owner r1 does not export %s", f)
		}
	}
	if st := r2.agent().Status(); st.Owner != "r1" || !st.Standby || st.State == driver.Running {
		t.Errorf("r2's view: %+v", st)
	}
}

// A replica that stops gracefully under load says it is leaving: the
// others place its agents among themselves and it hands each over as its
// running turn finishes — no turn cancelled, no message left for the ack
// wait.
func TestGracefulStopHandsAgentsOver(t *testing.T) {
	t.Parallel()
	c := newFleet(t, 30, "30s")
	for _, h := range []string{"r1", "r2", "r3"} {
		c.start(h)
	}
	c.waitSpread("three replicas", deadline, 10, 10)
	stop := make(chan struct{})
	loaded := c.load(40*time.Millisecond, stop)
	wait.Within(t, deadline, "turns on every replica", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		seen := map[string]bool{}
		for _, hs := range c.handled {
			for _, h := range hs {
				seen[h.holder] = true
			}
		}
		return len(seen) == 3
	})
	c.mu.Lock()
	r2 := c.reps["r2"]
	delete(c.reps, "r2") // no longer counted as live; its events still are
	c.mu.Unlock()
	stopping := time.Now()
	c.stop(r2)
	stopped := time.Since(stopping)
	load, _ := c.waitSpread("after r2 stopped", deadline, 15, 15)
	t.Logf("r2's graceful stop took %v; then %v", stopped, load)
	settled := time.Now()
	wait.Within(t, deadline, "a second of load after the stop", func() bool { return time.Since(settled) > time.Second })
	close(stop)
	<-loaded

	c.mu.Lock()
	var ids []string
	for id, at := range c.published {
		if at.After(stopping.Add(-2 * time.Second)) {
			ids = append(ids, id)
		}
	}
	c.mu.Unlock()
	wait.Within(t, deadline, "every message since the stop handled", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, id := range ids {
			if len(c.handled[id]) == 0 {
				if os.Getenv("AW_DEBUG") != "" {
					t.Logf("DEBUG missing %s", id)
				}
				return false
			}
		}
		return true
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		if d := c.handled[id][0].at.Sub(c.published[id]); d > 5*time.Second {
			t.Errorf("message %s handled %v after its publication", id, d)
		}
		if n := len(c.handled[id]); n > 1 {
			t.Errorf("message %s handled by %d turns", id, n)
		}
	}
	for _, f := range c.failed {
		if f.at.After(stopping.Add(-time.Second)) {
			t.Errorf("turn failed around the stop: %+v", f)
		}
	}
}
