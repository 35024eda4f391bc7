package driver_test

import (
	"context"
	"fmt"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/models/scripted"
	"github.com/agent-worker/agent-worker/scheduler"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// One agent's loop without NATS or HTTP: a wake message sent to the
// agent starts one turn through ADK on a scripted model; the turn's
// events say what it answered, and the agent sleeps again.
func Example() {
	st := memstore.New(nil)
	m, err := scripted.New("canned", config.Model{Script: []config.ScriptStep{scripted.Text("db-2: backup running, no action", 120, 8)}})
	if err != nil {
		panic(err)
	}
	bus := events.NewBus(0, nil)
	d, err := driver.New(driver.Deps{Store: st, Events: bus, Scheduler: scheduler.New(scheduler.Options{Store: st})},
		[]driver.Spec{{Name: "oncall", Model: m, Instruction: "You triage alerts.", HistoryTurns: 5}})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := d.Start(ctx); err != nil {
		panic(err)
	}
	defer d.Shutdown(ctx)

	done := bus.Subscribe(16, func(e events.Event) bool { return e.Type == events.TurnCompleted })
	defer done.Close()
	a, err := d.Agent("oncall")
	if err != nil {
		panic(err)
	}
	a.Send(inbox.Message{ID: "alert-1", Kind: inbox.Wake, Source: "example", Text: "disk 91% on db-2"})
	e := <-done.C
	fmt.Printf("turn %v: %v message(s), %v tokens in: %s\n", e.Data["turn"], e.Data["messages"], e.Data["tokens_in"], e.Data["text"])
	// Output:
	// turn 1: 1 message(s), 120 tokens in: db-2: backup running, no action
}
