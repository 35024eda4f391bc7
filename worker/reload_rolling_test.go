package worker

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
)

// TestReloadOneReplicaAtATime: an agent one replica's reload added is
// still unknown to the other until it reloads too; that replica leaves
// the agent's input in the log instead of dead-lettering it, so every
// message is handled once, by the agent, and none is dead-lettered. Then
// the agent is removed from one replica first: its input is again left
// for the replica that still runs it.
func TestReloadOneReplicaAtATime(t *testing.T) {
	c := newFleet(t, 1, "1s")
	r1, r2 := c.start("r1"), c.start("r2")
	c.waitSpread("at start", deadline, 0, 1)
	var mu sync.Mutex
	var rejected []string
	for _, r := range []*fleetReplica{r1, r2} {
		sub := r.w.Events().Subscribe(1000, func(e events.Event) bool { return e.Type == events.MessageRejected })
		t.Cleanup(sub.Close)
		go func() {
			for e := range sub.C {
				mu.Lock()
				rejected = append(rejected, fmt.Sprintf("%s on %s: %v", e.Agent, r.holder, e.Data))
				mu.Unlock()
			}
		}()
	}
	add := func(as []config.Agent) []config.Agent {
		a := as[0]
		a.Name = "a09"
		return append(as, a)
	}
	drop := func(as []config.Agent) []config.Agent {
		return slices.DeleteFunc(as, func(a config.Agent) bool { return a.Name == "a09" })
	}

	r1.reload(t, add) // r2 does not know a09 yet
	var ids []string
	for range 10 {
		ids = append(ids, c.publish("a09"))
	}
	c.waitHandledOnce(t, "a09's messages handled while only r1 has it", ids)
	r2.reload(t, add)

	r2.reload(t, drop) // r1 still runs a09
	ids = ids[:0]
	for range 10 {
		ids = append(ids, c.publish("a09"))
	}
	c.waitHandledOnce(t, "a09's messages handled while only r1 still has it", ids)
	r1.reload(t, drop)

	mu.Lock()
	defer mu.Unlock()
	if len(rejected) > 0 {
		t.Errorf("messages dead-lettered while the replicas' files disagreed: %v", rejected)
	}
}
