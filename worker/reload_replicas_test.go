package worker

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// TestReloadOnTwoReplicas: each replica reloads its own config. Agents
// added on both are placed over the two (one owner each) and handle their
// messages once; agents removed on both stop everywhere and their leases
// are let go; the others stay where they are owned.
func TestReloadOnTwoReplicas(t *testing.T) {
	c := newFleet(t, 2, "1s")
	r1, r2 := c.start("r1"), c.start("r2")
	c.waitSpread("at start", 20*time.Second, 1, 1)
	reloadBoth := func(edit func([]config.Agent) []config.Agent) {
		t.Helper()
		for _, r := range []*fleetReplica{r1, r2} {
			r.reload(t, edit)
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
	c.waitHandledOnce(t, "every message handled", ids)

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
	c.waitHandledOnce(t, "every message handled", ids)
}

// TestReloadSubscribeOnOneReplicaFirst: replica "new" reloads a file in
// which agent x binds alerts.> too; replica "old", which owns x and y (y
// binds alerts.> in both files), still runs the file without x's
// binding. Old must not purge what x will need: y handles every alert,
// old purges those from before x's binding (proof that it purges), and
// once old reloads too, x handles every alert published after new's
// reload, exactly once, and none from before.
func TestReloadSubscribeOnOneReplicaFirst(t *testing.T) {
	c := newFleet(t, 4, "1s")
	c.delay = "1ms"
	r1, r2 := c.start("r1"), c.start("r2")
	c.waitSpread("at start", 20*time.Second, 2, 2)
	handled := &handledCounter{n: map[string]int{}}
	for _, r := range []*fleetReplica{r1, r2} {
		sub := r.w.Events().Subscribe(1<<16, nil)
		go handled.run(sub)
		t.Cleanup(sub.Close)
	}
	old, fresh := r1, r2
	var mine []string
	for a, hs := range c.owners() {
		if slices.Equal(hs, []string{old.holder}) {
			mine = append(mine, a)
		}
	}
	slices.Sort(mine)
	if len(mine) < 2 {
		t.Fatalf("%s owns %v; want two agents", old.holder, mine)
	}
	x, y := mine[0], mine[1]
	ctx := context.Background()
	bind := func(r *fleetReplica, agents ...string) {
		t.Helper()
		r.reload(t, func(as []config.Agent) []config.Agent {
			for i, a := range as {
				if slices.Contains(agents, a.Name) {
					as[i].Subscribe = []config.Subscription{{Subject: "alerts.>", Mode: "inbox"}}
				}
			}
			return as
		})
	}
	bind(old, y)
	bind(fresh, y)
	publish := func(from, n int) (last uint64) {
		t.Helper()
		for i := from; i < from+n; i++ {
			id := fmt.Sprintf("alert-%d", i)
			ack, err := c.js.Publish(ctx, "alerts.x", fmt.Appendf(nil, `{"text": "alert", "id": %q}`, id))
			if err != nil {
				t.Fatal(err)
			}
			last = ack.Sequence
		}
		return last
	}
	before := publish(0, 5)
	bind(fresh, x, y) // old still runs the file without x's binding
	publish(5, 20)
	wait.Within(t, deadline, y+" to handle every alert", func() bool {
		for i := range 25 {
			if handled.count(y, fmt.Sprintf("alert-%d", i)) == 0 {
				return false
			}
		}
		return true
	})
	stream, err := c.js.Stream(ctx, "AGENTS")
	if err != nil {
		t.Fatal(err)
	}
	wait.Within(t, deadline, "the alerts from before x's binding purged", func() bool {
		info, err := stream.Info(ctx, jetstream.WithSubjectFilter("alerts.>"))
		return err == nil && info.State.FirstSeq > before
	})
	bind(old, x, y)
	wait.Within(t, deadline, x+" to handle every alert after its binding", func() bool {
		for i := 5; i < 25; i++ {
			if handled.count(x, fmt.Sprintf("alert-%d", i)) == 0 {
				return false
			}
		}
		return true
	})
	for i := range 25 {
		id := fmt.Sprintf("alert-%d", i)
		want := 1
		if i < 5 {
			want = 0
		}
		if n := handled.count(x, id); n != want {
			t.Errorf("%s handled %s %d times, want %d", x, id, n, want)
		}
		if n := handled.count(y, id); n != 1 {
			t.Errorf("%s handled %s %d times, want 1", y, id, n)
		}
	}
}

// reload applies r's config in force with its agents edited.
func (r *fleetReplica) reload(t *testing.T, edit func([]config.Agent) []config.Agent) {
	t.Helper()
	cfg := *r.w.Config()
	cfg.Agents = edit(slices.Clone(cfg.Agents))
	if _, err := r.w.Reload(context.Background(), &cfg, "test"); err != nil {
		t.Fatalf("%s: %v", r.holder, err)
	}
}
