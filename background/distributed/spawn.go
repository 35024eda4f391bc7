package distributed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/background"
	"github.com/agent-worker/agent-worker/internal/textclip"
)

// Spawn queues a subagent of parent on task: the parent's cap (limit) is
// checked and the id drawn in one compare-and-set of its registry, then
// the job is published (Nats-Msg-Id = id) and recorded queued. At the
// cap it returns background.ErrLimit itself, for the Manager to say how
// many run.
func (q *queue) Spawn(parent string, limit int, task, key, link string) (string, error) {
	o := &q.o
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	var id string
	existing := false
	err := q.reg.update(ctx, parent, func(g *registry) error {
		if i := g.byKey(key); i != nil {
			id, existing = i.ID, true // spawned before under this key: a resumed turn
			return errNoChange
		}
		if g.live() >= limit {
			return background.ErrLimit
		}
		g.Seq++
		id = parent + "-sub-" + strconv.Itoa(g.Seq)
		return nil
	})
	switch {
	case existing:
		q.log.Info("subagent spawn repeated by a resumed turn; the first one stands", "agent", parent, "subagent", id)
		return id, nil
	case errors.Is(err, background.ErrLimit):
		return "", err
	case err != nil:
		return "", fmt.Errorf("cannot queue a subagent now (the state store is unavailable): %w", err)
	}
	j := job{ID: id, Parent: parent, Task: task, Queued: q.clock.Now(), Key: key, TraceParent: link}
	msg := nats.NewMsg(o.Subjects.SubagentJobs())
	msg.Data, _ = json.Marshal(j)
	msg.Header.Set(nats.MsgIdHdr, id)
	q.seal(msg)
	pctx, pcancel := context.WithTimeout(context.Background(), publishTimeout)
	_, err = o.JetStream.PublishMsg(pctx, msg)
	pcancel()
	if err != nil {
		return "", fmt.Errorf("cannot queue a subagent now (NATS): %w", err)
	}
	err = q.reg.update(ctx, parent, func(g *registry) error {
		if g.Subs[id] != nil {
			return errNoChange // a replica already started it
		}
		g.Subs[id] = &background.Info{ID: id, Task: textclip.Runes(task, background.TaskClip, "…"), State: background.StateQueued, Queued: j.Queued, Key: key}
		return nil
	})
	if err != nil {
		q.log.Warn("subagent queued but not in the registry yet; the replica that runs it records it", "agent", parent, "subagent", id, "error", err)
	}
	q.log.Info("subagent queued", "agent", parent, "subagent", id)
	q.h.Emit(parent, background.EventQueued, map[string]any{"id": id})
	return id, nil
}

// Stop records a stop of parent's subagent id in the registry (so a
// queued job is reported stopped instead of run, and a runner that missed
// the notice stops at its next model call) and publishes a stop notice.
func (q *queue) Stop(ctx context.Context, parent, id, by string) error {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	err := q.reg.update(ctx, parent, func(g *registry) error {
		i := g.Subs[id]
		switch {
		case i == nil || !i.Live():
			return background.NotRunning(id, i)
		case i.StopRequestedBy != "":
			return errNoChange
		}
		i.StopRequestedBy = by
		return nil
	})
	if err != nil {
		return err
	}
	return q.notify(notice{Op: "stop", Parent: parent, ID: id, By: by})
}

// Running counts parent's subagents running on any replica, from the
// registry; on a store error, the last count read.
func (q *queue) Running(parent string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	g, err := q.reg.get(ctx, parent)
	q.countMu.Lock()
	defer q.countMu.Unlock()
	if err != nil {
		return q.counts[parent]
	}
	n := g.running()
	q.counts[parent] = n
	return n
}

// List returns parent's subagents from its registry, the same on every
// replica, in no particular order.
func (q *queue) List(ctx context.Context, parent string) ([]background.Info, error) {
	g, err := q.reg.get(ctx, parent)
	if err != nil {
		return nil, err
	}
	return g.list(), nil
}
