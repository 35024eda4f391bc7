package background

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/internal/textclip"
)

// spawn queues a subagent of f on task: the parent's cap is checked and
// the id drawn in one compare-and-set of its registry, then the job is
// published (Nats-Msg-Id = id) and recorded queued.
func (r *remote) spawn(f *family, task, key, link string) (string, error) {
	o := r.opts()
	f.spawnMu.Lock()
	defer f.spawnMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	var id string
	existing := false
	err := r.reg.update(ctx, f.name, func(g *registry) error {
		if i := g.byKey(key); i != nil {
			id, existing = i.ID, true // spawned before under this key: a resumed turn
			return errNoChange
		}
		if g.live() >= f.spec.Max {
			return limitError(f.spec.Max)
		}
		g.Seq++
		id = f.name + "-sub-" + strconv.Itoa(g.Seq)
		return nil
	})
	switch {
	case existing:
		o.Log.Info("subagent spawn repeated by a resumed turn; the first one stands", "agent", f.name, "subagent", id)
		return id, nil
	case errors.Is(err, ErrLimit):
		return "", err
	case err != nil:
		return "", fmt.Errorf("cannot queue a subagent now (the state store is unavailable): %w", err)
	}
	j := job{ID: id, Parent: f.name, Task: task, Queued: o.Clock.Now(), Key: key, TraceParent: link}
	msg := nats.NewMsg(o.Subjects.SubagentJobs())
	msg.Data, _ = json.Marshal(j)
	msg.Header.Set(nats.MsgIdHdr, id)
	r.seal(msg)
	pctx, pcancel := context.WithTimeout(context.Background(), publishTimeout)
	_, err = o.JetStream.PublishMsg(pctx, msg)
	pcancel()
	if err != nil {
		return "", fmt.Errorf("cannot queue a subagent now (NATS): %w", err)
	}
	err = r.reg.update(ctx, f.name, func(g *registry) error {
		if g.Subs[id] != nil {
			return errNoChange // a replica already started it
		}
		g.Subs[id] = &Info{ID: id, Task: textclip.Runes(task, TaskClip, "…"), State: StateQueued, Queued: j.Queued, Key: key}
		return nil
	})
	if err != nil {
		o.Log.Warn("subagent queued but not in the registry yet; the replica that runs it records it", "agent", f.name, "subagent", id, "error", err)
	}
	o.Log.Info("subagent queued", "agent", f.name, "subagent", id)
	r.m.emit(f.name, EventQueued, map[string]any{"id": id})
	return id, nil
}

// stop records a stop of parent's subagent id in the registry (so a
// queued job is reported stopped instead of run, and a runner that missed
// the notice stops at its next model call) and publishes a stop notice.
func (r *remote) stop(ctx context.Context, parent, id, by string) error {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	err := r.reg.update(ctx, parent, func(g *registry) error {
		i := g.Subs[id]
		switch {
		case i == nil:
			return fmt.Errorf("%w %q", ErrUnknown, id)
		case !i.Live():
			return fmt.Errorf("%w: %s %s", ErrFinished, id, i.State)
		case i.StopRequestedBy != "":
			return errNoChange
		}
		i.StopRequestedBy = by
		return nil
	})
	if err != nil {
		return err
	}
	return r.notify(notice{Op: "stop", Parent: parent, ID: id, By: by})
}

// running counts parent's subagents running on any replica, from the
// registry; on a store error, the last count read.
func (r *remote) running(parent string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	g, err := r.reg.get(ctx, parent)
	r.countMu.Lock()
	defer r.countMu.Unlock()
	if err != nil {
		return r.counts[parent]
	}
	n := g.running()
	r.counts[parent] = n
	return n
}
