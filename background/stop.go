package background

import (
	"context"
	"fmt"
)

// Stop stops a running subagent of parent at its request; its report
// says it was stopped.
func (m *Manager) Stop(parent, id string) error {
	return m.StopBy(context.Background(), parent, id, ByParent)
}

// StopBy stops a subagent of parent, wherever it runs, saying who asked
// ("its parent", "operator (token ops)"). It returns once the stop is
// recorded and announced: the subagent stops within a NATS round trip,
// or at once when still queued, and its report says "stopped by <by>".
// Errors: ErrNotParent, ErrUnknown (no such subagent), ErrFinished.
func (m *Manager) StopBy(ctx context.Context, parent, id, by string) error {
	m.mu.Lock()
	f := m.parents[parent]
	if f == nil {
		m.mu.Unlock()
		return fmt.Errorf("%w: %q may not spawn subagents", ErrNotParent, parent)
	}
	if m.distributed != nil {
		m.mu.Unlock()
		return m.distributed.Stop(ctx, parent, id, by)
	}
	defer m.mu.Unlock()
	if s := f.running[id]; s != nil {
		if s.stopBy == "" {
			s.stopBy = by
		}
		s.cancel(stopCause(by))
		return nil
	}
	for _, i := range m.finished[parent] {
		if i.ID == id {
			return NotRunning(id, &i)
		}
	}
	return NotRunning(id, nil)
}
