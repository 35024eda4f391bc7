package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/events/eventstream"
	"github.com/agent-worker/agent-worker/natsbus"
)

// eventsStopTimeout bounds how long Stop waits for the events stream to
// acknowledge the last events.
const eventsStopTimeout = 5 * time.Second

// startEvents sends the bus's events out. With JetStream they are stored
// in the durable events stream (<nats.stream>_EVENTS, events.max_age,
// events.max_bytes, nats.replicas copies), which the API's event streams
// read on every replica; its unstored events are counted in the metrics.
// In core NATS mode they are published fire-and-forget instead, and the
// API's event streams read this replica's ring. It runs before the
// agents start, so their first events are kept too.
func (w *Worker) startEvents(st *starting) error {
	ctx, cfg, subjects, o := st.ctx, st.cfg, st.subjects, st.o
	if w.conn.JS == nil {
		w.stopEv = natsbus.ForwardEvents(w.conn.NC, subjects, w.bus, o.Log)
		return nil
	}
	s, err := eventstream.Open(ctx, eventstream.Options{
		Conn: w.conn.NC, Name: cfg.NATS.Stream + "_EVENTS", Subjects: subjects,
		MaxAge: cfg.Events.MaxAge.D(), MaxBytes: cfg.Events.MaxBytes, Replicas: cfg.NATS.Replicas,
		Replica: holderName(cfg), Log: o.Log,
	})
	if err != nil {
		return fmt.Errorf("%w: events stream: %w", ErrConfig, err)
	}
	w.events = s
	stop := s.Record(w.bus)
	w.stopEv = func() { stop(eventsStopTimeout) }
	w.metrics.WatchEventStore(s)
	return nil
}

// eventFeed is what the API's event streams read: the durable events
// stream, or nil (the bus's ring) in core NATS mode.
func (w *Worker) eventFeed() api.EventFeed {
	if w.events == nil {
		return nil
	}
	return w.events
}

// EventStream returns the durable events stream; nil in core NATS mode.
func (w *Worker) EventStream() *eventstream.Stream { return w.events }

// initBus makes the event bus, which every later step publishes on.
func (w *Worker) initBus(s *starting) error {
	w.bus = events.NewBus(0, s.o.Log)
	return nil
}

// stopBusReaders stops the bus's readers: the events stream's forwarder
// (startEvents) and the metrics' observer (initMetrics). They attach in
// later steps but stop here, after everything that publishes events.
func (w *Worker) stopBusReaders(context.Context) {
	if w.stopEv != nil { // after everything that publishes events
		w.stopEv()
	}
	if w.stopMetrics != nil {
		w.stopMetrics()
	}
}
