package worker

import (
	"net/http"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/internal/wait"
)

// tenThousand is the number of agents one worker must run: with one
// router per replica and no consumer per agent, nothing in delivery grows
// with it but a few words per agent.
const tenThousand = 10000

// Ten thousand agents in one worker each handle a message: every agent
// is owned, ready, woken by its own message and records its turn. On the
// layout before the log (two durable consumers per agent) the start alone
// took 86 s on this machine, and 1,200 agents timed out under -race.
func TestTenThousandAgentsInOneWorkerEachHandleAMessage(t *testing.T) {
	// Not parallel: ten thousand agents' leases renewed inside the ttl is
	// part of what it shows, on 2 cores.
	began := time.Now()
	c := newFleet(t, tenThousand, "10s")
	c.lease = "ttl: 15s, heartbeat: 1s"
	// The agents' state in memory: this test is about delivery, and ten
	// thousand agents' restores from JetStream KV under -race take minutes
	// of their own (BenchmarkScale measures the product with KV).
	c.store = "memory://"
	r := c.start("r1")
	wait.Within(t, 6*deadline, "every agent owned", func() bool { _, ok := c.spread(); return ok })
	if code, body := readyz(t, r.w.APIAddr()); code != http.StatusOK {
		t.Fatalf("/readyz: %d %s", code, body)
	}
	owned := time.Since(began)
	ids := map[string]string{}
	for _, a := range c.agents {
		ids[a] = c.publish(a)
	}
	published := time.Since(began)
	wait.Within(t, 10*deadline, "every agent's message handled", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, id := range ids {
			if len(c.handled[id]) == 0 {
				return false
			}
		}
		return true
	})
	c.mu.Lock()
	for a, id := range ids {
		if n := len(c.handled[id]); n != 1 {
			t.Errorf("agent %s: message %s handled %d times", a, id, n)
		}
	}
	c.mu.Unlock()
	if lost := lostLeases(t, r.w); lost != 0 {
		t.Errorf("lost %v leases: renewals fell behind the ttl", lost)
	}
	t.Logf("%d agents, one replica: all owned and ready %v after start, %d messages published by %v, all handled by %v",
		tenThousand, owned.Round(time.Millisecond), tenThousand, published.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}

// lostLeases sums agent_worker_ownership_changes_total{reason="lost"}.
func lostLeases(t *testing.T, w *Worker) float64 {
	t.Helper()
	return metricLabelSums(t, w, "agent_worker_ownership_changes_total", "reason")["lost"]
}
