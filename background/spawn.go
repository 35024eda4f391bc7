package background

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// Spawn starts a subagent of parent on task (distributed: queues its
// job).
func (m *Manager) Spawn(parent, task string) (string, error) { return m.SpawnKeyed(parent, task, "") }

// SpawnKeyed is Spawn made idempotent by key (the spawning tool call's
// action id, journal.ActionID): a spawn under a key already spawned
// starts nothing and returns the first subagent's id — whether it still
// runs in this process or finished (the newest keyedKeep keys), or,
// distributed, has a record in the parent's registry (queued, running or
// finished; the job carries the key to the replica that records it). So a
// turn resumed from its journal that spawns again finds the first. Not
// covered: a local subagent that died with its process (it is started
// again: its report was lost with it), and, distributed, a respawn in the
// moment between the job's publish and its first record.
func (m *Manager) SpawnKeyed(parent, task, key string) (string, error) {
	return m.spawn("", parent, task, key)
}

// spawn is SpawnKeyed for a spawn made by a traced turn: link is the
// spawning tool call's traceparent ("" for none), which the subagent's
// run links to (and, distributed, its job carries).
func (m *Manager) spawn(link, parent, task, key string) (string, error) {
	if m.o.Charger != nil {
		if err := m.o.Charger.Admit(context.Background(), parent); err != nil {
			return "", fmt.Errorf("no subagent can start now: %w", err)
		}
	}
	m.mu.Lock()
	f := m.parents[parent]
	switch {
	case m.closing:
		m.mu.Unlock()
		return "", ErrShutdown
	case f == nil:
		m.mu.Unlock()
		return "", fmt.Errorf("agent %q may not spawn subagents", parent)
	case m.distributed != nil:
		m.mu.Unlock()
		return m.spawnDistributed(f, task, key, link)
	case key != "" && f.keyed[key] != "":
		id := f.keyed[key]
		m.mu.Unlock()
		m.o.Log.Info("subagent spawn repeated by a resumed turn; the first one stands", "agent", parent, "subagent", id)
		return id, nil
	case len(f.running) >= f.spec.Max:
		m.mu.Unlock()
		return "", limitError(f.spec.Max)
	}
	m.seq++
	id := parent + "-sub-" + strconv.Itoa(m.seq)
	if key != "" {
		f.remember(key, id)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	now := m.o.Clock.Now()
	s := &sub{id: id, task: task, cancel: cancel, run: 1, queued: now, started: now, link: link}
	f.running[id] = s
	m.wg.Add(1)
	m.mu.Unlock()

	m.o.Log.Info("subagent started", "agent", parent, "subagent", id)
	m.emit(parent, EventStarted, map[string]any{"id": id})
	go m.execute(ctx, f, s)
	return id, nil
}

// spawnDistributed queues the job of a subagent of f, one spawn of f at a
// time (so its cap is read and its job queued together).
func (m *Manager) spawnDistributed(f *family, task, key, link string) (string, error) {
	f.spawnMu.Lock()
	defer f.spawnMu.Unlock()
	id, err := m.distributed.Spawn(f.name, f.spec.Max, task, key, link)
	if errors.Is(err, ErrLimit) {
		return "", limitError(f.spec.Max)
	}
	return id, err
}

func limitError(n int) error {
	return fmt.Errorf("%w: %d subagents are already running (the most this agent may run at once); wait for their reports", ErrLimit, n)
}

// execute runs s to its end under its timeout and finishes it. The
// caller did m.wg.Add(1).
func (m *Manager) execute(ctx context.Context, f *family, s *sub) {
	defer m.wg.Done()
	timer := m.o.Clock.AfterFunc(f.spec.Timeout, func() { s.cancel(context.DeadlineExceeded) })
	defer timer.Stop()
	text, err := m.run(ctx, f, s)
	m.finish(f, s, text, err, context.Cause(ctx))
}
