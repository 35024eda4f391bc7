package background

import (
	"context"

	"google.golang.org/adk/plugin"

	"github.com/agent-worker/agent-worker/hook"
	"github.com/agent-worker/agent-worker/tools"
	"github.com/agent-worker/agent-worker/tracing"
)

// Guard returns the hook the driver calls when this replica has restored
// an agent it owns (hook.Guard's Restore, listed after the guardrails):
// from then on the parent's charge records are consumed and applied
// here, and its subagents' admit requests answered. Its other methods do
// nothing.
func (m *Manager) Guard() hook.Guard { return ownerHook{m} }

type ownerHook struct{ m *Manager }

func (h ownerHook) Attach(string, hook.Control) {}

func (h ownerHook) Restore(_ context.Context, agent string) error {
	if h.m.distributed != nil {
		h.m.distributed.Restored(agent)
	}
	return nil
}

func (h ownerHook) Admit(context.Context, string) error { return nil }
func (h ownerHook) BeginTurn(string, hook.TurnInfo)     {}
func (h ownerHook) EndTurn(string)                      {}
func (h ownerHook) Plugin(string) *plugin.Plugin        { return nil }

// Spawner returns the tools' handle for parent's subagents.
func (m *Manager) Spawner(parent string) tools.Spawner { return spawner{m, parent} }

type spawner struct {
	m      *Manager
	parent string
}

func (s spawner) Spawn(ctx context.Context, task, key string) (string, error) {
	return s.m.spawn(tracing.TraceParent(ctx), s.parent, task, key)
}
func (s spawner) Stop(id string) error {
	return s.m.StopBy(context.Background(), s.parent, id, ByParent)
}
