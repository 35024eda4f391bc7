package background

import (
	"context"
	"fmt"
)

// Running returns how many subagents of parent are running: in local
// mode, in this process; in distributed mode, on any replica, from the
// registry, so every replica gives the same count (if the store cannot
// be read, the last count read). Queued ones, waiting for a replica with
// room, are not counted here (List shows them); they do count against
// Spec.Max. A subagent whose replica died counts until its job is
// delivered again (nats.ack_wait) and another replica runs it, or it is
// reported failed.
func (m *Manager) Running(parent string) int {
	m.mu.Lock()
	f := m.parents[parent]
	n := 0
	if f != nil {
		n = len(f.running)
	}
	m.mu.Unlock()
	if f == nil || m.distributed == nil {
		return n
	}
	return m.distributed.Running(parent)
}

// List returns parent's subagents, newest first: live ones and the
// newest finished ones. In distributed mode it reads the registry, the
// same from every replica; in local mode this process's.
func (m *Manager) List(ctx context.Context, parent string) ([]Info, error) {
	m.mu.Lock()
	f := m.parents[parent]
	var out []Info
	if f != nil && m.distributed == nil {
		for _, s := range f.running {
			out = append(out, s.info(m.o.Replica, StateRunning))
		}
		out = append(out, m.finished[parent]...)
	}
	m.mu.Unlock()
	if f == nil {
		return nil, fmt.Errorf("%w: %q may not spawn subagents", ErrNotParent, parent)
	}
	if m.distributed != nil {
		list, err := m.distributed.List(ctx, parent)
		if err != nil {
			return nil, err
		}
		sortInfos(list)
		return list, nil
	}
	sortInfos(out)
	return out, nil
}
