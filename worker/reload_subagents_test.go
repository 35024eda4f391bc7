package worker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/background"
	"github.com/agent-worker/agent-worker/events"
)

// subagentsFile writes a config whose agent boss has the given tools; its
// model spawns a subagent on every turn, and the subagents' model hangs
// until stopped.
func subagentsFile(t *testing.T, path, dataDir, bossTools string) {
	t.Helper()
	y := fmt.Sprintf(`data_dir: %s
shutdown_grace: 5s
api: {listen: "127.0.0.1:0"}
nats: {listen: "-1"}
models:
  fake:
    provider: scripted
    script: [{text: "noted"}]
    loop: true
  spawner:
    provider: scripted
    script:
      - call: {name: spawn_subagent, args: {task: "index the wiki"}}
      - text: "spawned"
    loop: true
  slow:
    provider: scripted
    script: [{hang: true}]
agents:
  - {name: ops, model: fake}
  - name: boss
    model: spawner
    tools: %s
    subagents: {model: slow}
`, dataDir, bossTools)
	if err := os.WriteFile(path+".new", []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
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
	waitFor(t, "boss to be owned", func() bool { return w.Leases().Held("boss") })

	subagentsFile(t, path, dataDir, "[spawn_subagent]")
	if ch, err := w.ReloadConfig(context.Background(), "test"); err != nil || fmt.Sprint(ch.Changed) != "[boss]" {
		t.Fatalf("grant: %+v %v", ch, err)
	}
	waitFor(t, "boss owned again after its change", func() bool { return w.Leases().Held("boss") })
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
