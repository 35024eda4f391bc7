package control

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/hook"
)

// memoryTimeout bounds reading the turns a memory view counts (the
// history may load them from the store).
const memoryTimeout = 5 * time.Second

// memoryVerb shows, folds or clears the agent's memory on its owner.
// memory_compact queues the fold and answers at once (202): a fold is a
// model call, longer than a forwarded request waits; the view, events and
// metrics tell its outcome. memory_clear is audited: its event names
// req.By and req.Reason.
func memoryVerb(r Reply, a *driver.Agent, req Request) Reply {
	ctx, cancel := context.WithTimeout(context.Background(), memoryTimeout)
	defer cancel()
	var v driver.MemoryView
	var err error
	code := http.StatusOK
	switch req.Verb {
	case VerbMemory:
		v, err = a.Memory(ctx)
	case VerbMemoryCompact:
		v, err = a.CompactMemory(ctx, req.Audit())
		code = http.StatusAccepted
	case VerbMemoryClear:
		v, err = a.ClearMemory(ctx, req.Audit())
	}
	switch {
	case errors.Is(err, driver.ErrMemoryOff), errors.Is(err, hook.ErrHalted), errors.Is(err, driver.ErrStopped):
		return r.fail(http.StatusConflict, "%v", err)
	case errors.Is(err, driver.ErrNotOwner):
		return r.fail(http.StatusServiceUnavailable, "%v", err)
	case err != nil:
		return r.fail(http.StatusInternalServerError, "memory of agent %q: %v", a.Name(), err)
	}
	return r.result(code, v)
}
