package worker

import (
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/internal/wait"
)

// A message waiting for an owner that dies is handled by the next owner
// as soon as it holds the lease: it reads on from the agent's cursors.
// Nothing waits for an ack deadline (ack_wait is 30s here; the layout
// before the log redelivered such a message only once it ran out).
func TestAMessageWaitingForAKilledOwnerIsHandledWithinTheLeaseTTL(t *testing.T) {
	t.Parallel()
	const ttl = 3 * time.Second
	c := newFleet(t, 2, "30s")
	c.lease = "ttl: 3s, heartbeat: 200ms"
	c.delay = "10ms"
	c.start("r1")
	c.start("r2")
	c.waitSpread("two replicas", deadline, 1, 1)
	owner := c.owners()["a00"][0]
	r := c.reps[owner]
	// The owner holds a message it has read but not handled: its gate is
	// closed as for a handover (in memory only, nothing stored), so it
	// reads its log but runs no turn. Then it dies.
	a, _ := r.w.Driver().Agent("a00")
	if err := a.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	id := c.publish("a00")
	wait.Within(t, deadline, "the message read by its owner", func() bool { return a.Status().InboxPending == 1 })
	c.kill(owner)
	killed := time.Now()
	wait.Within(t, 10*ttl, "the message handled by the other replica", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.handled[id]) > 0
	})
	c.mu.Lock()
	h := c.handled[id]
	c.mu.Unlock()
	if len(h) != 1 || h[0].holder == owner {
		t.Fatalf("handled %+v, want once, by the replica that survived", h)
	}
	took := h[0].at.Sub(killed)
	t.Logf("handled by %s %v after the kill (lease ttl %v, ack_wait 30s)", h[0].holder, took.Round(time.Millisecond), ttl)
	if took > ttl+time.Second {
		t.Errorf("handled %v after the kill, more than the lease ttl %v + 1s", took.Round(time.Millisecond), ttl)
	}
}
