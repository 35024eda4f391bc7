package control_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/internal/wait"
	"github.com/agent-worker/agent-worker/models/scripted"
	"github.com/agent-worker/agent-worker/store/memstore"
)

// memoryReplica is a replica of one agent, "keeper", with memory on and a
// one-turn window; it owns the agent when owns.
func memoryReplica(t *testing.T, url, name string, owns bool) (*control.Control, *driver.Agent, *events.Bus) {
	t.Helper()
	m, err := scripted.New("fake", config.Model{Script: []config.ScriptStep{scripted.Text("ok", 10, 1)}, Loop: true})
	if err != nil {
		t.Fatal(err)
	}
	bus := events.NewBus(0, nil)
	d, err := driver.New(driver.Deps{Store: memstore.New(nil), Events: bus}, []driver.Spec{{Name: "keeper", Model: m, HistoryTurns: 1,
		Memory: driver.MemorySpec{Enabled: true}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Shutdown(context.Background()); cancel() })
	owner := &owned{agents: map[string]bool{"keeper": owns}}
	ctl, err := control.New(control.Options{Driver: d, Owner: owner, Holder: name, Conn: connect(t, url), Subjects: subjects, Timeout: 2 * time.Second,
		Seal: testKey, LoopbackNATS: true})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := ctl.ServeNATS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	a, _ := d.Agent("keeper")
	return ctl, a, bus
}

// The memory verbs act on the agent's owner, whichever replica is asked:
// view, fold (202, queued) and clear, audited with the caller's name.
func TestMemoryVerbsActOnTheOwner(t *testing.T) {
	t.Parallel()
	url := runNATS(t)
	_, owner, bus := memoryReplica(t, url, "replica-a", true)
	asked, standby, _ := memoryReplica(t, url, "replica-b", false)
	cleared := bus.Subscribe(16, func(e events.Event) bool { return e.Type == events.MemoryCleared })

	owner.Send(inbox.Message{Kind: inbox.Wake, Text: "the vault token rotates at noon", Source: "test"})
	wait.For(t, "the first turn", func() bool { return owner.Status().Turns == 1 && owner.State() == driver.Sleeping })
	owner.Send(inbox.Message{Kind: inbox.Wake, Text: "second", Source: "test"})
	wait.For(t, "a fold on the owner", func() bool {
		v, _ := owner.Memory(context.Background())
		return strings.Contains(v.Text, "the vault token rotates at noon")
	})

	view := func(verb string) (control.Reply, driver.MemoryView) {
		t.Helper()
		r, err := asked.Do(as(context.Background(), "ops"), "keeper", control.Request{Verb: verb, By: "ops", Reason: "audit"})
		if err != nil {
			t.Fatal(err)
		}
		var v driver.MemoryView
		if len(r.Result) > 0 {
			if err := json.Unmarshal(r.Result, &v); err != nil {
				t.Fatal(err)
			}
		}
		return r, v
	}
	r, v := view(control.VerbMemory)
	if r.Owner != "replica-a" || r.Status() != http.StatusOK || !strings.Contains(v.Text, "vault token") {
		t.Fatalf("memory view from the standby: %+v %+v", r, v)
	}
	if sv, _ := standby.Memory(context.Background()); sv.Text != "" {
		t.Fatal("the standby folded or holds the owner's memory")
	}
	r, _ = view(control.VerbMemoryCompact)
	if r.Status() != http.StatusAccepted || r.Owner != "replica-a" {
		t.Fatalf("memory_compact: %+v", r)
	}
	// A fold still running at the clear is folded again into the empty
	// memory (driver.Agent.ClearMemory): let the queued one end first.
	wait.For(t, "the queued fold on the owner", func() bool {
		v, err := owner.Memory(context.Background())
		return err == nil && !v.Folding && !v.Queued && v.Unfolded == 0
	})
	r, v = view(control.VerbMemoryClear)
	if r.Status() != http.StatusOK || v.Text != "" || v.ClearedBy != "ops" {
		t.Fatalf("memory_clear: %+v %+v", r, v)
	}
	select {
	case e := <-cleared.C:
		if e.Data["by"] != "ops" || e.Data["reason"] != "audit" {
			t.Fatalf("memory-cleared %v", e.Data)
		}
	case <-time.After(deadline):
		t.Fatal("no memory-cleared event on the owner")
	}
	if ov, _ := owner.Memory(context.Background()); ov.Text != "" {
		t.Fatal("the owner's memory was not cleared")
	}
}
