package distributed

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// run is one run of a subagent on this replica, for a delivery of its
// job: the queue's side of it (background.Job), which the Manager calls
// while the run lasts.
type run struct {
	q      *queue
	parent string
	id     string
	task   string
	number int // the job's delivery count, from 1
	queued time.Time

	mu  sync.Mutex
	msg jetstream.Msg // the job's newest delivery
}

// job is what the registry needs to know of the run's job to record it.
func (r *run) job() job {
	return job{ID: r.id, Parent: r.parent, Task: r.task, Queued: r.queued}
}

// delivery returns the job's newest delivery, which acks, naks and
// in-progress acks answer.
func (r *run) delivery() jetstream.Msg {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.msg
}

// redeliver records a delivery of the job that came while it runs here.
func (r *run) redeliver(msg jetstream.Msg) {
	r.mu.Lock()
	r.msg = msg
	r.mu.Unlock()
}

// keepAlive sends in-progress acks for the job every AckWait/3 (real
// time: the server's ack wait is) until the returned stop is called.
func (r *run) keepAlive() func() {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(max(r.q.o.AckWait/3, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = r.delivery().InProgress()
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done) }) }
}
