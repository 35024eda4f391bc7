package worker

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agent-worker/agent-worker/events"
)

// scaleCounts counts the worker's events as they are published: messages
// handled and turns completed, by agent index and in all.
type scaleCounts struct {
	index                   map[string]int
	perAgent                []atomic.Int64 // messages handled
	handled, turns          atomic.Int64
	waiting, folds, lastAny atomic.Int64 // lastAny: when the last event came, UnixNano
	sub                     *events.Subscription

	mu         sync.Mutex
	waitingWhy string // the first waiting event's reason
}

func (c *scaleCounts) firstWaiting() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waitingWhy
}

func countEvents(w *Worker, n int) *scaleCounts {
	c := &scaleCounts{index: make(map[string]int, n), perAgent: make([]atomic.Int64, n)}
	for i := range n {
		c.index[scaleAgent(i)] = i
	}
	// The filter counts, on the publisher's goroutine, and delivers
	// nothing.
	c.sub = w.Events().Subscribe(1, func(e events.Event) bool {
		c.lastAny.Store(time.Now().UnixNano())
		switch e.Type {
		case events.Waiting:
			if c.waiting.Add(1) == 1 {
				c.mu.Lock()
				c.waitingWhy = fmt.Sprint(e.Data["reason"])
				c.mu.Unlock()
			}
		case events.MemoryCompacted:
			c.folds.Add(1)
		}
		i, ok := c.index[e.Agent]
		if !ok {
			return false
		}
		switch e.Type {
		case events.MessageHandled:
			c.perAgent[i].Add(1)
			c.handled.Add(1)
		case events.TurnCompleted:
			c.turns.Add(1)
		}
		return false
	})
	return c
}

// quiet waits until the worker published no event for 500ms and the
// process's CPU is back near idle (the server's trailing work: purges,
// the store's writes), at most 10s; it returns how long it waited.
func (c *scaleCounts) quiet(idle float64) time.Duration {
	const quietFor = 500 * time.Millisecond
	t0 := time.Now()
	end := t0.Add(10 * time.Second)
	for time.Since(time.Unix(0, c.lastAny.Load())) < quietFor && time.Now().Before(end) {
		time.Sleep(50 * time.Millisecond)
	}
	cpuQuiet(idle, end)
	return time.Since(t0)
}
