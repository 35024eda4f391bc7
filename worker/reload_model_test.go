package worker

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/store"
)

// A reload keeps an operator's model switch while the model is still
// configured — also when the agent itself changes and is replaced — and
// drops it, logged and announced, when the reload removes the model: the
// stored switch is deleted and the next turn runs on the configured model.
func TestReloadKeepsOrDropsAModelSwitch(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	path := filepath.Join(t.TempDir(), "config.yaml")
	const backup = "  backup: {provider: scripted, model: backup-1, script: [{text: \"on backup\", usage: {input: 10, output: 1}}], loop: true}\n"
	reloadFile(t, path, dataDir, "", "  - {name: triage, model: fake}\n", backup)
	w, _, js := startReloading(t, path)
	sub := w.Events().Subscribe(10000, nil)
	t.Cleanup(sub.Close)
	wait.Within(t, deadline, "triage owned", func() bool { return w.Leases().Held("triage") })
	agent := func() *driver.Agent {
		a, err := w.Driver().Agent("triage")
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	if _, err := agent().SwitchModel(hook.Audit{By: "ops"}, "backup", ""); err != nil {
		t.Fatal(err)
	}
	next := (&running{t: t, w: w, sub: sub}).waitEvent
	served := func(text string) string {
		t.Helper()
		if _, err := js.Publish(t.Context(), "agents.triage.inbox", []byte(text)); err != nil {
			t.Fatal(err)
		}
		return next(guard.EventCharged).Data["model"].(string)
	}

	// The agent changes (its instruction): replaced, it keeps the switch.
	reloadFile(t, path, dataDir, "", "  - {name: triage, model: fake, instruction: \"be brief\"}\n", backup)
	ch, err := w.ReloadConfig(context.Background(), "test")
	if err != nil || !slices.Contains(ch.Changed, "triage") {
		t.Fatalf("reload: %v, changed %v", err, ch.Changed)
	}
	wait.Within(t, deadline, "the replaced agent restored the switch", func() bool {
		c, ok := agent().ModelChoice()
		return ok && c.Model == "backup" && c.By == "ops"
	})
	if got := served("disk full on db-1"); got != "backup-1" {
		t.Errorf("after the agent changed, a turn was served by %q, want backup-1", got)
	}

	// The reload removes the model: the switch is dropped.
	reloadFile(t, path, dataDir, "", "  - {name: triage, model: fake, instruction: \"be brief\"}\n")
	ch, err = w.ReloadConfig(context.Background(), "test")
	if err != nil || !slices.Contains(ch.Changed, "triage") || !strings.Contains(strings.Join(ch.Why["triage"], ","), "models.backup (switched)") {
		t.Fatalf("reload: %v, changed %v why %v", err, ch.Changed, ch.Why)
	}
	dropped := next(events.ModelSwitchDropped)
	if dropped.Data["model"] != "backup" || dropped.Data["switched_by"] != "ops" || dropped.Data["configured"] != "fake" {
		t.Errorf("model-switch-dropped %v", dropped.Data)
	}
	if c, ok := agent().ModelChoice(); ok {
		t.Errorf("still switched to %+v", c)
	}
	if _, err := w.Store().Get(t.Context(), "agent.triage.model"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the dropped switch: %v, want it deleted from the store", err)
	}
	if got := served("disk full on db-2"); got != "fake" {
		t.Errorf("after the model was removed, a turn was served by %q, want the configured fake", got)
	}
}
