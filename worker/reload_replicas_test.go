package worker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/config"
)

// TestReloadOnTwoReplicas: each replica reloads its own config. Agents
// added on both are placed over the two (one owner each) and handle their
// messages once; agents removed on both stop everywhere and their leases
// are let go; the others stay where they are owned.
func TestReloadOnTwoReplicas(t *testing.T) {
	c := newFleet(t, 2, "1s")
	r1, r2 := c.start("r1"), c.start("r2")
	c.waitSpread("at start", 20*time.Second, 1, 1)
	ctx := context.Background()
	with := func(r *fleetReplica, edit func([]config.Agent) []config.Agent) *config.Config {
		cfg := *r.w.Config()
		cfg.Agents = edit(slices.Clone(cfg.Agents))
		return &cfg
	}
	reloadBoth := func(edit func([]config.Agent) []config.Agent) {
		t.Helper()
		for _, r := range []*fleetReplica{r1, r2} {
			if _, err := r.w.Reload(ctx, with(r, edit), "test"); err != nil {
				t.Fatalf("%s: %v", r.holder, err)
			}
		}
	}
	handledOnce := func(ids []string) {
		t.Helper()
		waitFor(t, "every message handled", func() bool {
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
		defer c.mu.Unlock()
		for _, id := range ids {
			if n := len(c.handled[id]); n != 1 {
				t.Errorf("%s handled %d times", id, n)
			}
		}
	}

	added := []string{"a02", "a03", "a04", "a05"}
	reloadBoth(func(as []config.Agent) []config.Agent {
		for _, n := range added {
			a := as[0]
			a.Name = n
			as = append(as, a)
		}
		return as
	})
	c.agents = append(c.agents, added...)
	c.waitSpread("after the add", 20*time.Second, 2, 4)
	var ids []string
	for _, a := range c.agents {
		ids = append(ids, c.publish(a))
	}
	handledOnce(ids)

	gone := []string{"a00", "a03"}
	reloadBoth(func(as []config.Agent) []config.Agent {
		return slices.DeleteFunc(as, func(a config.Agent) bool { return slices.Contains(gone, a.Name) })
	})
	c.agents = slices.DeleteFunc(c.agents, func(a string) bool { return slices.Contains(gone, a) })
	c.waitSpread("after the removal", 20*time.Second, 1, 4)
	for _, r := range []*fleetReplica{r1, r2} {
		for _, a := range gone {
			if _, err := r.w.Driver().Agent(a); err == nil || r.w.Leases().Held(a) {
				t.Fatalf("%s still has the removed agent %s", r.holder, a)
			}
		}
	}
	ids = ids[:0]
	for _, a := range c.agents {
		ids = append(ids, c.publish(a))
	}
	handledOnce(ids)
}
