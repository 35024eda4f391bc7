package natsbus

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/tracing"
)

// perMessage are event types raised once per input message; they stay in
// process (API, metrics) and are not echoed to NATS, where they would
// double the traffic of every input.
var perMessage = map[string]bool{events.MessageQueued: true, events.Wake: true}

// ForwardEvents publishes the bus's events to
// <prefix>.<agent>.events.<type> as JSON, until stop is called: turns,
// pauses, reports, drops, rejections, guardrails — everything except the
// per-message message-queued and wake events. Publishing
// is core NATS (fire and forget); the forwarder has its own buffer, so a
// slow connection never slows an agent: events it cannot keep up with are
// dropped, logged and counted by the bus subscription.
func ForwardEvents(nc *nats.Conn, subjects Subjects, bus *events.Bus, log *slog.Logger) (stop func()) {
	sub := bus.Subscribe(8192, func(e events.Event) bool { return !perMessage[e.Type] })
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range sub.C {
			data, err := json.Marshal(e)
			if err != nil {
				log.Warn("event not encodable; not published", "agent", e.Agent, "type", e.Type, "error", err)
				continue
			}
			if err := nc.Publish(subjects.Event(e.Agent, e.Type), data); err != nil {
				log.Warn("event publish failed", "agent", e.Agent, "type", e.Type, "error", err)
			}
		}
	}()
	return func() {
		sub.Close()
		<-done
	}
}

// Publisher publishes an agent's message for the publish tool.
type Publisher struct{ NC *nats.Conn }

// Publish sends data to subject (core NATS; a stream that captures the
// subject stores it), with id as its Nats-Msg-Id when not empty: a stream
// drops a second message with the same id within its duplicate window
// (2 minutes by default), and core subscribers see the header. It carries
// ctx's trace context as its traceparent header, so a consumer can link
// its work to the turn that published.
func (p Publisher) Publish(ctx context.Context, subject string, data []byte, id string) error {
	m := nats.NewMsg(subject)
	m.Data = data
	if id != "" {
		m.Header.Set(nats.MsgIdHdr, id)
	}
	tracing.InjectNATS(ctx, m.Header)
	return p.NC.PublishMsg(m)
}
