package worker

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// TestOneReplicaRunsAnAgentAndAnotherTakesOverWhenItDies runs two workers
// on one NATS server (JetStream and KV state shared): only the lease
// holder handles messages; when it loses NATS (a crash, as far as the
// others can tell), the other takes the agent over within the lease TTL
// and handles what was left unacked and what comes next.
func TestOneReplicaRunsAnAgentAndAnotherTakesOverWhenItDies(t *testing.T) {
	t.Parallel()
	port, dir := freePort(t), t.TempDir()
	ns := runServer(t, port, dir)
	t.Cleanup(ns.Shutdown)
	cfg := func(holder string) setup {
		// Pinned to r1: r2 stands by, and takes the agent only when no
		// replica matching the affinity is left.
		return setup{natsURL: ns.ClientURL(), top: fmt.Sprintf("lease: {holder: %s, ttl: 3s}\n", holder), agent: "    replica_affinity: r1"}
	}
	rec1, rec2 := newRecorder(), newRecorder()
	r1 := start(t, writeConfig(t, cfg("r1")), rec1, nil)
	r2 := start(t, writeConfig(t, cfg("r2")), rec2, nil)
	a1, a2 := r1.agent(), r2.agent()
	wait.Within(t, deadline, "r1 owns, r2 stands by", func() bool { return !a1.Status().Standby && a2.Status().Standby })

	for i := 1; i <= 3; i++ {
		r2.publish("agents.triage.inbox", fmt.Sprintf("before the crash %d", i))
	}
	wait.Within(t, deadline, "r1 handled them", func() bool { return strings.Count(rec1.all(), "before the crash") >= 3 })
	if rec2.calls() != 0 {
		t.Fatalf("the standby replica ran %d model calls", rec2.calls())
	}

	// r1 loses NATS: its lease cannot be renewed and it lets the agent go;
	// r2 takes over once the lease expires.
	r1.w.NATS().NC.Close()
	r2.publish("agents.triage.inbox", "after the crash")
	wait.Within(t, deadline, "r2 took over", func() bool { return !a2.Status().Standby })
	wait.Within(t, deadline, "r2 handled the new message", func() bool { return strings.Contains(rec2.all(), "after the crash") })
	wait.Within(t, deadline, "r1 stood down", func() bool { return a1.Status().Standby })
	if s := a1.Status(); s.State == driver.Running {
		t.Fatalf("r1 still running: %+v", s)
	}
	if strings.Contains(rec1.all(), "after the crash") {
		t.Fatal("the deposed replica handled a message after losing the lease")
	}
	r1.nc.Close()
	r1.w.Stop(t.Context())
	r1.w = nil
}

// TestAPIMessagesTravelThroughNATS posts to the standby replica's API: the
// message is published to the agent's subject and handled by the owner,
// once, even when posted twice with the same id.
func TestAPIMessagesTravelThroughNATS(t *testing.T) {
	t.Parallel()
	port, dir := freePort(t), t.TempDir()
	ns := runServer(t, port, dir)
	t.Cleanup(ns.Shutdown)
	cfg := func(holder string) setup {
		// Pinned to r1: r2 stands by, and takes the agent only when no
		// replica matching the affinity is left.
		return setup{natsURL: ns.ClientURL(), top: fmt.Sprintf("lease: {holder: %s, ttl: 3s}\n", holder), agent: "    replica_affinity: r1"}
	}
	rec1, rec2 := newRecorder(), newRecorder()
	r1 := start(t, writeConfig(t, cfg("r1")), rec1, nil)
	r2 := start(t, writeConfig(t, cfg("r2")), rec2, nil)
	wait.Within(t, deadline, "r1 owns", func() bool { return !r1.agent().Status().Standby && r2.agent().Status().Standby })
	for range 2 {
		resp, err := http.Post("http://"+r2.w.APIAddr()+"/v1/agents/triage/messages", "application/json",
			strings.NewReader(`{"text": "restart the payment gateway", "id": "op-7"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
			t.Fatalf("POST: %d", resp.StatusCode)
		}
	}
	wait.Within(t, deadline, "the owner handled it", func() bool { return strings.Contains(rec1.all(), "restart the payment gateway") })
	r1.publish("agents.triage.inbox", "sentinel")
	wait.Within(t, deadline, "sentinel handled", func() bool { return strings.Contains(rec1.all(), "sentinel") })
	if n := strings.Count(rec1.all(), "restart the payment gateway"); n != 1 {
		t.Fatalf("the message reached the model %d times, want once", n)
	}
	if rec2.calls() != 0 {
		t.Fatal("the standby replica ran the agent")
	}
	if !strings.Contains(rec1.all(), "via: api") {
		t.Fatalf("the prompt does not say the message came over the API:\n%s", rec1.all())
	}
}
