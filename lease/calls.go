package lease

import (
	"hash/fnv"
	"sync"
)

// callLanes is how many agents' callbacks may run at once.
const callLanes = 8

func newCallLanes() []*callQueue {
	lanes := make([]*callQueue, callLanes)
	for i := range lanes {
		lanes[i] = newCallQueue()
	}
	return lanes
}

// callsOf is the agent's lane: its callbacks run there, in order.
func (m *Manager) callsOf(agent string) *callQueue {
	h := fnv.New32a()
	_, _ = h.Write([]byte(agent))
	return m.calls[h.Sum32()%uint32(len(m.calls))]
}

// flushCalls returns once every callback queued so far has run.
func (m *Manager) flushCalls() {
	var wg sync.WaitGroup
	for _, c := range m.calls {
		wg.Go(func() { c.now(func() {}) })
	}
	wg.Wait()
}

// callQueue runs queued calls one at a time, in order, on one goroutine.
type callQueue struct {
	mu      sync.Mutex
	q       []func()
	wake    chan struct{}
	stopped bool
	done    chan struct{}
}

func newCallQueue() *callQueue {
	c := &callQueue{wake: make(chan struct{}, 1), done: make(chan struct{})}
	go c.run()
	return c
}

func (c *callQueue) run() {
	defer close(c.done)
	for {
		c.mu.Lock()
		q, stopped := c.q, c.stopped
		c.q = nil
		c.mu.Unlock()
		for _, f := range q {
			f()
		}
		if len(q) > 0 {
			continue
		}
		if stopped {
			return
		}
		<-c.wake
	}
}

// later queues f after every call queued before it; once the queue is
// stopped, f runs at once.
func (c *callQueue) later(f func()) {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		f()
		return
	}
	c.q = append(c.q, f)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// now runs f after every call queued before it and returns when f has.
func (c *callQueue) now(f func()) {
	done := make(chan struct{})
	c.later(func() {
		defer close(done)
		f()
	})
	<-done
}

// stop runs what is queued and ends the goroutine.
func (c *callQueue) stop() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	<-c.done
}
