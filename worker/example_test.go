package worker_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/worker"
)

// A worker on its embedded NATS server and store, one agent on a
// scripted model: a message posted to the operator API wakes it, and its
// one turn answers. This is `agent-worker run` without the command line.
func Example() {
	dir, err := os.MkdirTemp("", "agent-worker-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "worker.yaml")
	yaml := `data_dir: ` + dir + `
nats: {listen: "-1"}
api: {listen: "127.0.0.1:0"}
models:
  canned:
    provider: scripted
    script: [{text: "db-2 is at 91% disk: the nightly backup; it clears by 06:00"}]
agents:
  - name: oncall
    model: canned
    instruction: "You triage alerts for the payments cluster."
`
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		panic(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	w, err := worker.Start(ctx, cfg, worker.Options{})
	if err != nil {
		panic(err)
	}
	defer w.Stop(ctx)

	done := w.Events().Subscribe(16, func(e events.Event) bool { return e.Type == events.TurnCompleted })
	defer done.Close()
	resp, err := http.Post("http://"+w.APIAddr()+"/v1/agents/oncall/messages", "application/json",
		strings.NewReader(`{"text": "disk 91% on db-2", "id": "alert-1"}`))
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println("posted:", resp.StatusCode)

	e := <-done.C
	fmt.Printf("turn %v handled %v message(s): %s\n", e.Data["turn"], e.Data["messages"], e.Data["text"])
	// Output:
	// posted: 202
	// turn 1 handled 1 message(s): db-2 is at 91% disk: the nightly backup; it clears by 06:00
}
