package config

import (
	"slices"
	"testing"
	"time"
)

func TestDefaultValidates(t *testing.T) {
	t.Parallel()
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("Default() does not validate:\n%v", err)
	}
	a, ok := c.Agent("demo")
	if !ok {
		t.Fatal("no demo agent")
	}
	if m := c.Models[a.Model]; m.Provider != "scripted" || m.Behaviour != "demo" || m.Model != "demo" {
		t.Errorf("demo model = %+v", m)
	}
	if !slices.Equal(a.Tools, []string{"schedule_next_turn", "report_done"}) {
		t.Errorf("tools = %v", a.Tools)
	}
	if a.Sleep != (Sleep{Min: Duration(5 * time.Second), Max: Duration(20 * time.Second)}) {
		t.Errorf("sleep = %+v", a.Sleep)
	}
	if !a.WakeOnStart {
		t.Error("the demo agent does not wake on start: make run would show no turn")
	}
	if a.Instruction == "" || a.Inbox.Cap != 256 || a.Watchdog.Mode != "enforce" {
		t.Errorf("defaults not applied to the demo agent: %+v", a)
	}
	if c.Store.URL != "nats://" || c.File != "" {
		t.Errorf("store %q file %q", c.Store.URL, c.File)
	}
}

func TestDefaultIsFresh(t *testing.T) {
	t.Parallel()
	a := Default()
	a.Agents[0].Tools[0] = "changed"
	a.Models["demo"] = Model{}
	b := Default()
	if b.Agents[0].Tools[0] != "schedule_next_turn" || b.Models["demo"].Provider != "scripted" {
		t.Error("Default() shares state between calls")
	}
}
