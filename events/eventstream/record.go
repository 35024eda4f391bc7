package eventstream

import (
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/events"
)

// Record stores every event bus publishes from now on in the stream,
// until stop is called. It runs once at a time per Stream: a second call
// before stop panics. Publishing is asynchronous from a buffer
// of Options.Buffer events, so the bus — and the turn that publishes —
// never waits for NATS. Events that find the buffer full, or that
// JetStream does not acknowledge within Options.AckTimeout, are not
// stored: they are counted (Unstored) and logged, at most one line per ten
// seconds for failed publishes.
//
// stop stops taking events, publishes those still buffered, and waits up
// to timeout for their acknowledgements (the ones still unacknowledged
// then are logged); call it before the connection closes.
func (s *Stream) Record(bus *events.Bus) (stop func(timeout time.Duration)) {
	pub, err := jetstream.New(s.o.Conn,
		jetstream.WithPublishAsyncMaxPending(maxPending),
		jetstream.WithPublishAsyncTimeout(s.o.AckTimeout),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) {
			s.fail(m.Subject, err)
		}))
	if err != nil {
		panic("eventstream: the publisher's options are fixed and valid: " + err.Error())
	}
	sub := bus.Subscribe(s.o.Buffer, nil)
	s.mu.Lock()
	if s.recorder != nil {
		s.mu.Unlock()
		sub.Close()
		panic("eventstream: Record called while another Record runs")
	}
	s.recorder = sub
	s.mu.Unlock()

	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range sub.C {
			if s.publishing != nil {
				s.publishing(e)
			}
			s.publish(pub, e)
		}
	}()
	var once sync.Once
	return func(timeout time.Duration) {
		once.Do(func() {
			sub.Close() // C closes after what is buffered; the loop publishes it
			<-done
			select {
			case <-pub.PublishAsyncComplete():
			case <-time.After(timeout):
				s.log.Warn("events stream: publishes still unacknowledged at stop; they may be lost",
					"stream", s.o.Name, "pending", pub.PublishAsyncPending())
			}
			s.mu.Lock()
			s.overflow += sub.Dropped()
			s.recorder = nil
			s.mu.Unlock()
		})
	}
}

// publish sends one event without waiting for its acknowledgement (the
// error handler counts a failed one). It waits only when maxPending
// publishes are unacknowledged, up to stallWait, while the buffer holds
// the events behind.
func (s *Stream) publish(pub jetstream.JetStream, e events.Event) {
	subject := s.o.Subjects.Prefix + "." + token(e.Agent) + ".events." + token(e.Type)
	e.Seq = 0 // the stream's sequence is the id
	e.Replica = s.o.Replica
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	data, err := json.Marshal(e)
	if err != nil {
		s.fail(subject, errors.Join(errors.New("encode event"), err))
		return
	}
	if _, err := pub.PublishMsgAsync(&nats.Msg{Subject: subject, Data: data}, jetstream.WithStallWait(stallWait)); err != nil {
		s.fail(subject, err)
	}
}

// fail counts an event not stored and logs it, or counts it toward the
// next log line.
func (s *Stream) fail(subject string, err error) {
	n := s.failed.Add(1)
	if ok, held := s.flog.allow(time.Now()); ok {
		s.log.Warn("event not stored in the events stream", "stream", s.o.Name, "subject", subject, "error", err,
			"failed_total", n, "not_logged_since_last", held)
	}
}

// Unstored returns how many events were not stored since the Stream was
// opened: overflow found Record's buffer full (also logged by the bus, as
// for any slow subscriber), failed could not be encoded or were not
// acknowledged by JetStream. Both only grow.
func (s *Stream) Unstored() (overflow, failed uint64) {
	s.mu.Lock()
	overflow = s.overflow
	if s.recorder != nil {
		overflow += s.recorder.Dropped()
	}
	s.mu.Unlock()
	return overflow, s.failed.Load()
}
