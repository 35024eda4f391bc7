package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/config"
)

// manyAgents is past nats-server's default of 1,000 consumers per stream
// (500 agents' two consumers each): the agents past the 499th bound only
// because the stream has a limit of its own (nats.max_consumers).
const manyAgents = 1200

// streamConsumers counts the consumers on the fleet's input stream.
func (c *fleet) streamConsumers(t *testing.T) int {
	t.Helper()
	s, err := c.js.Stream(context.Background(), "AGENTS")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Consumers
}

// allConsuming waits until every agent has one live owner that consumes
// it, the stream holds every agent's two consumers and the unknown
// agents', and every replica is ready.
func (c *fleet) allConsuming(t *testing.T) {
	t.Helper()
	want := config.ConsumersNeeded(len(c.agents))
	waitWithin(t, "every agent owned and bound", 3*deadline, func() bool {
		if _, ok := c.spread(); !ok {
			return false
		}
		for _, r := range c.live() {
			if len(r.w.binding.NotConsuming()) > 0 {
				return false
			}
		}
		return c.streamConsumers(t) == want
	})
	for _, r := range c.live() {
		if code, body := readyz(t, r.w.APIAddr()); code != http.StatusOK {
			t.Fatalf("%s /readyz: %d %s", r.holder, code, body)
		}
		if got := metricSums(t, r.w)["agent_worker_agents_not_consuming"]; got != 0 {
			t.Errorf("%s agent_worker_agents_not_consuming = %v, want 0", r.holder, got)
		}
	}
}

// handledOnce publishes one message to agent and waits for a completed
// turn that handled it.
func (c *fleet) handledOnce(t *testing.T, agent string) {
	t.Helper()
	id := c.publish(agent)
	waitFor(t, "message "+id+" to "+agent+" handled", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.handled[id]) > 0
	})
}

func TestWorkerBindsAgentsPastTheServersDefaultConsumerLimit(t *testing.T) {
	// Not parallel: manyAgents agents' leases renewed inside a 3s ttl under -race
	// is this test's point, and a parallel test of the package sharing
	// the 2 cores made the renewals fall behind (both replicas owning
	// most agents at the spread's deadline, seen in a full make test).
	began := time.Now()
	c := newFleet(t, manyAgents, "10s")
	r := c.start("r1")
	c.allConsuming(t)
	bound := time.Since(began)
	s, _ := c.js.Stream(context.Background(), "AGENTS")
	if limit, want := s.CachedInfo().Config.MaxConsumers, 2*config.ConsumersNeeded(manyAgents); limit != want {
		t.Errorf("stream max_consumers = %d, want %d (twice what %d agents need)", limit, want, manyAgents)
	}
	c.handledOnce(t, c.agents[len(c.agents)-1])
	t.Logf("%d agents, one replica: all %d consumers bound %v after start; the last agent's message handled %v after start",
		manyAgents, c.streamConsumers(t), bound.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	stopping := time.Now()
	c.stop(r)
	t.Logf("stopped in %v", time.Since(stopping).Round(time.Millisecond))
}

func TestTwoReplicasBindAgentsPastTheServersDefaultConsumerLimit(t *testing.T) {
	// Not parallel: manyAgents agents' leases renewed inside a 3s ttl under -race
	// is this test's point, and a parallel test of the package sharing
	// the 2 cores made the renewals fall behind (both replicas owning
	// most agents at the spread's deadline, seen in a full make test).
	began := time.Now()
	c := newFleet(t, manyAgents, "10s")
	// The tests' short lease timing (ttl 3s): 600 leases a replica are
	// renewed well inside it, also under -race with other tests loading
	// the machine, while the callbacks bind 600 agents' consumers.
	c.start("r1")
	c.start("r2")
	// Each owns about half; the two share the same durable consumers, so
	// the stream holds 2 × agents + 1 of them, not twice that.
	_, spreadIn := c.waitSpread("two replicas", 4*deadline, manyAgents/2-manyAgents/20, manyAgents/2+manyAgents/20)
	c.allConsuming(t)
	bound := time.Since(began)
	c.handledOnce(t, c.agents[len(c.agents)-1])
	c.handledOnce(t, c.agents[0])
	load, _ := c.spread()
	t.Logf("%d agents, two replicas (%s): spread %v after the second start, all bound %v after the first start; messages handled %v after",
		manyAgents, loads(load), spreadIn.Round(time.Millisecond), bound.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	// A lease lost is one the other replica took while its holder still
	// believed it held it (its renewals fell behind): two owners at once.
	// Before, renewals ran one lease after another and, with 600 leases
	// each under -race, fell behind the 3s ttl.
	for _, r := range c.live() {
		if lost := lostLeases(t, r.w); lost != 0 {
			t.Errorf("%s lost %v leases to the other replica", r.holder, lost)
		}
	}
}

// lostLeases sums agent_worker_ownership_changes_total{reason="lost"}.
func lostLeases(t *testing.T, w *Worker) float64 {
	t.Helper()
	return metricLabelSums(t, w, "agent_worker_ownership_changes_total", "reason")["lost"]
}

// A consumer limit full of others' consumers: the agent that cannot bind
// makes /readyz 503 naming it, shows in its status and the metrics, and is
// retried until the limit has room; then it is ready and handles its
// message.
func TestABindFailureMakesReadyz503AndIsRetried(t *testing.T) {
	t.Parallel()
	c := newFleet(t, 2, "10s")
	c.maxConsumers = config.ConsumersNeeded(2) // exactly what the agents need
	c.bindRetry = 50 * time.Millisecond
	ctx := context.Background()
	// The stream as the worker makes it, with someone else's consumer on it.
	s, err := c.js.CreateStream(ctx, jetstream.StreamConfig{Name: "AGENTS", Subjects: []string{"agents.*.inbox", "agents.*.deferred"},
		Retention: jetstream.InterestPolicy, Storage: jetstream.FileStorage, MaxAge: 7 * 24 * time.Hour, Duplicates: 2 * time.Minute,
		MaxConsumers: c.maxConsumers, Metadata: map[string]string{"agent-worker": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "operator-probe", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	r := c.start("r1")
	var stuck string
	waitFor(t, "an agent not consuming", func() bool {
		if nc := r.w.binding.NotConsuming(); len(nc) == 1 && nc[0].Attempts >= 2 {
			stuck = nc[0].Agent
			return true
		}
		return false
	})
	code, body := readyz(t, r.w.APIAddr())
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "agent "+stuck+" not consuming") || !strings.Contains(body, "maximum consumers limit") {
		t.Fatalf("/readyz with %s unbound: %d %s", stuck, code, body)
	}
	view := agentView(t, r.w, stuck)
	if !strings.HasPrefix(view.NotConsuming, "not consuming: ") || !strings.Contains(view.NotConsuming, "maximum consumers limit") {
		t.Errorf("status of %s: not_consuming %q", stuck, view.NotConsuming)
	}
	m := metricSums(t, r.w)
	if m["agent_worker_agents_not_consuming"] != 1 || m["agent_worker_bind_failures_total"] < 2 {
		t.Errorf("metrics: agents_not_consuming %v, bind_failures_total %v; want 1 and at least 2", m["agent_worker_agents_not_consuming"], m["agent_worker_bind_failures_total"])
	}
	id := c.publish(stuck) // waits in the stream meanwhile

	// Lift the cause: the retry binds the agent, /readyz recovers.
	if err := s.DeleteConsumer(ctx, "operator-probe"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "/readyz 200 again", func() bool {
		code, _ := readyz(t, r.w.APIAddr())
		return code == http.StatusOK
	})
	waitFor(t, "the waiting message handled", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.handled[id]) == 1
	})
	if v := agentView(t, r.w, stuck); v.NotConsuming != "" {
		t.Errorf("status after the retry bound it: not_consuming %q", v.NotConsuming)
	}
	if got := metricSums(t, r.w)["agent_worker_agents_not_consuming"]; got != 0 {
		t.Errorf("agent_worker_agents_not_consuming after recovery = %v", got)
	}
}

// agentView fetches GET /v1/agents/{name}.
func agentView(t *testing.T, w *Worker, name string) (v struct {
	NotConsuming string `json:"not_consuming"`
}) {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://%s/v1/agents/%s", w.APIAddr(), name))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// waitWithin polls cond until it holds, for at most within.
func waitWithin(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	end := time.Now().Add(within)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		<-time.After(5 * time.Millisecond)
	}
}

// A NATS account whose JetStream limit allows fewer consumers per stream
// than the agents need fails the start as a configuration error naming
// both numbers, before any agent runs.
func TestStartFailsWhenTheAccountCannotHoldTheAgentsConsumers(t *testing.T) {
	t.Parallel()
	conf := filepath.Join(t.TempDir(), "server.conf")
	if err := os.WriteFile(conf, []byte(`listen: "127.0.0.1:-1"
jetstream: {store_dir: "`+t.TempDir()+`"}
accounts: {A: {jetstream: {max_consumers: 4}, users: [{user: a, password: a}]}}
no_auth_user: a
`), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	opts.NoLog, opts.NoSigs = true, true
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	t.Cleanup(ns.Shutdown)
	c := newFleet(t, 2, "10s")
	c.url = ns.ClientURL()
	w, err := Start(context.Background(), c.config("r1"), Options{})
	if err == nil {
		w.Stop(context.Background())
		t.Fatal("started with an account that holds 4 consumers per stream for 2 agents (5)")
	}
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "allows 4 consumers per stream") || !strings.Contains(err.Error(), "need 5") {
		t.Fatalf("start error: %v", err)
	}
}
