package turnlog

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// MaxPending bounds the writes waiting per agent. A write queued beyond
// it drops the oldest waiting one, which is logged.
const MaxPending = 64

// writeTimeout bounds one write.
const writeTimeout = 10 * time.Second

type job struct {
	what string
	run  func(ctx context.Context) error
}

// writer runs each agent's writes in order on a goroutine that lives only
// while the agent has writes waiting, so idle agents cost nothing.
type writer struct {
	log     *slog.Logger
	mu      sync.Mutex
	queues  map[string][]job // an entry exists while its goroutine runs
	drained chan struct{}    // closed when queues empties; nil when nobody waits
}

func newWriter(log *slog.Logger) *writer {
	return &writer{log: log, queues: map[string][]job{}}
}

func (w *writer) enqueue(agent string, j job) {
	w.mu.Lock()
	q, running := w.queues[agent]
	if len(q) >= MaxPending {
		w.log.Warn("record dropped: too many writes waiting for the store", "agent", agent, "dropped", q[0].what, "waiting", len(q))
		q = q[1:]
	}
	w.queues[agent] = append(q, j)
	w.mu.Unlock()
	if !running {
		go w.drain(agent)
	}
}

func (w *writer) drain(agent string) {
	for {
		w.mu.Lock()
		q := w.queues[agent]
		if len(q) == 0 {
			delete(w.queues, agent)
			if len(w.queues) == 0 && w.drained != nil {
				close(w.drained)
				w.drained = nil
			}
			w.mu.Unlock()
			return
		}
		j := q[0]
		w.queues[agent] = q[1:]
		w.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		err := j.run(ctx)
		cancel()
		if err != nil {
			w.log.Warn("record not written; it is lost (the turn or message it describes is not affected)", "agent", agent, "record", j.what, "error", err)
		}
	}
}

func (w *writer) flush(ctx context.Context) error {
	w.mu.Lock()
	for len(w.queues) > 0 {
		if w.drained == nil {
			w.drained = make(chan struct{})
		}
		ch := w.drained
		w.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		w.mu.Lock()
	}
	w.mu.Unlock()
	return nil
}
