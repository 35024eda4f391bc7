package driver

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/adk/model"

	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/models"
	"github.com/agent-worker/agent-worker/models/scripted"
	"github.com/agent-worker/agent-worker/scheduler"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// switchable is the agent model a worker gives: "main", switchable to
// "backup" (both scripted).
func switchable(t *testing.T) model.LLM {
	t.Helper()
	defs := map[string]config.Model{
		"main":   {Provider: "scripted", Model: "main-1", Script: []config.ScriptStep{text("on main")}, Loop: true},
		"backup": {Provider: "scripted", Model: "backup-1", Script: []config.ScriptStep{text("on backup")}, Loop: true},
	}
	build := func(key string, def config.Model) (model.LLM, error) { return scripted.New(key, def) }
	m, err := build("main", defs["main"])
	if err != nil {
		t.Fatal(err)
	}
	return models.NewSwitch("main", m, defs, build, models.Env{})
}

// switchReplica is a replica over st whose agent's model can be switched.
func switchReplica(t *testing.T, st store.Store, c *clock.Fake, leased bool, owner scheduler.Owner) *Agent {
	t.Helper()
	return replicaWith(t, st, c, leased, owner, switchable(t))
}

// Only the owner switches the model and writes the switch: a replica
// standing by, or not holding the lease, refuses (ErrNotOwner) and
// changes nothing, here or in the store. A replica that takes the agent
// over restores the owner's switch before its first turn; a switch back
// deletes it, and the next owner runs on the configured model.
func TestOnlyTheOwnerSwitchesTheModel(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(epoch)
	st := memstore.New(c)
	ctx := context.Background()
	owner := switchReplica(t, st, c, true, nil)
	owner.SetOwned(true)
	wait.For(t, "the owner restored", func() bool { return !owner.needsRestore() })
	v, err := owner.SwitchModel(hook.Audit{By: "ops", Reason: "incident"}, "backup", "")
	if err != nil || v.Active != "backup" || v.ActiveName != "backup-1" || !v.Switched || v.By != "ops" || v.Configured != "main" {
		t.Fatalf("SwitchModel = %+v, %v", v, err)
	}
	before, err := st.Get(ctx, "agent.tester.model")
	if err != nil {
		t.Fatal(err)
	}

	standby := switchReplica(t, st, c, true, nil)
	unleased := switchReplica(t, st, c, false, ownsNothing{})
	// The unleased replica restores what the store holds (the owner's
	// switch): the refusal must leave its view as the restore made it.
	wait.For(t, "the unleased replica restored", func() bool { return !unleased.needsRestore() })
	for name, a := range map[string]*Agent{"standby": standby, "unleased": unleased} {
		was, _ := a.ModelView()
		if _, err := a.SwitchModel(hook.Audit{By: "ops"}, "", ""); !errors.Is(err, ErrNotOwner) {
			t.Errorf("%s: SwitchModel = %v, want ErrNotOwner", name, err)
		}
		if v, _ := a.ModelView(); v.Active != was.Active || v.Switched != was.Switched || v.By != was.By || (v.Since == nil) != (was.Since == nil) || (v.Since != nil && !v.Since.Equal(*was.Since)) {
			t.Errorf("%s: view %+v after a refusal, was %+v", name, v, was)
		}
	}
	if after, err := st.Get(ctx, "agent.tester.model"); err != nil || after.Revision != before.Revision {
		t.Fatalf("a replica that does not own the agent wrote its model switch: %+v, %v", after, err)
	}

	standby.SetOwned(true)
	wait.For(t, "the new owner restored the switch", func() bool {
		ch, ok := standby.ModelChoice()
		return ok && ch.Model == "backup" && ch.By == "ops" && ch.Reason == "incident"
	})
	if v, err := standby.SwitchModel(hook.Audit{By: "ops"}, "", ""); err != nil || v.Switched || v.Active != "main" {
		t.Fatalf("switch back = %+v, %v", v, err)
	}
	if _, err := st.Get(ctx, "agent.tester.model"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after the switch back the store holds %v, want nothing", err)
	}
	third := switchReplica(t, st, c, true, nil)
	third.SetOwned(true)
	wait.For(t, "the third owner restored", func() bool { return !third.needsRestore() })
	if ch, ok := third.ModelChoice(); ok {
		t.Errorf("the third owner runs on %+v, want the configured model", ch)
	}
}

// An agent whose model is not a ModelSwitch refuses a switch.
func TestAModelThatCannotBeSwitched(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(epoch)
	a := replicaOn(t, memstore.New(c), c, false, nil)
	if _, err := a.SwitchModel(hook.Audit{}, "backup", ""); !errors.Is(err, ErrNoModelSwitch) {
		t.Errorf("SwitchModel = %v, want ErrNoModelSwitch", err)
	}
}
