package worker

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/background"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// subagentModels are boss's model, which spawns a subagent on every
// turn, and the subagents' model, which hangs until stopped.
const subagentModels = `  spawner:
    provider: scripted
    script:
      - call: {name: spawn_subagent, args: {task: "index the wiki"}}
      - text: "spawned"
    loop: true
  slow:
    provider: scripted
    script: [{hang: true}]
`

// subagentsFile writes a config whose agent boss has the given tools.
func subagentsFile(t *testing.T, path, dataDir, bossTools string) {
	t.Helper()
	reloadFile(t, path, dataDir, "", "  - {name: ops, model: fake}\n  - name: boss\n    model: spawner\n    tools: "+bossTools+"\n    subagents: {model: slow}\n", subagentModels)
}

// TestReloadGrantsAndWithdrawsSubagents: a reload that grants an agent
// spawn_subagent lets its next turn spawn one; a reload that withdraws
// the grant stops the subagent it runs, reported as stopped.
func TestReloadGrantsAndWithdrawsSubagents(t *testing.T) {
	dataDir := t.TempDir()
	path := filepath.Join(t.TempDir(), "config.yaml")
	subagentsFile(t, path, dataDir, "[]")
	w, _, js := startReloading(t, path)
	sub := w.Events().Subscribe(1000, func(e events.Event) bool {
		return e.Agent == "boss" && (e.Type == background.EventStarted || e.Type == background.EventFinished)
	})
	defer sub.Close()
	wait.Within(t, deadline, "boss to be owned", func() bool { return w.Leases().Held("boss") })

	subagentsFile(t, path, dataDir, "[spawn_subagent]")
	if ch, err := w.ReloadConfig(context.Background(), "test"); err != nil || fmt.Sprint(ch.Changed) != "[boss]" {
		t.Fatalf("grant: %+v %v", ch, err)
	}
	wait.Within(t, deadline, "boss owned again after its change", func() bool { return w.Leases().Held("boss") })
	msg := nats.NewMsg("agents.boss.inbox")
	msg.Data = []byte(`{"text": "index it", "id": "go-1"}`)
	if _, err := js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	next := func(typ string) events.Event {
		t.Helper()
		for {
			select {
			case e := <-sub.C:
				if e.Type == typ {
					return e
				}
			case <-time.After(deadline):
				t.Fatalf("no %s event", typ)
			}
		}
	}
	started := next(background.EventStarted)

	subagentsFile(t, path, dataDir, "[]")
	if _, err := w.ReloadConfig(context.Background(), "test"); err != nil {
		t.Fatalf("withdraw: %v", err)
	}
	finished := next(background.EventFinished)
	if finished.Data["id"] != started.Data["id"] || finished.Data["outcome"] != background.OutcomeStopped {
		t.Fatalf("after the grant was withdrawn: %v, want %v stopped", finished.Data, started.Data["id"])
	}
}
