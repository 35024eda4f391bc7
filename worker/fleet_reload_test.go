package worker

import (
	"context"
	"slices"
	"testing"

	"github.com/agent-worker/agent-worker/config"
)

// reload applies r's config in force with its agents edited.
func (r *fleetReplica) reload(t *testing.T, edit func([]config.Agent) []config.Agent) {
	t.Helper()
	cfg := *r.w.Config()
	cfg.Agents = edit(slices.Clone(cfg.Agents))
	if _, err := r.w.Reload(context.Background(), &cfg, "test"); err != nil {
		t.Fatalf("%s: %v", r.holder, err)
	}
}

// waitHandledOnce waits until every message of ids was handled by a
// completed turn, then checks none was handled twice.
func (c *fleet) waitHandledOnce(t *testing.T, what string, ids []string) {
	t.Helper()
	waitFor(t, what, func() bool {
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
