package natsinbox

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/natsbus"
	"github.com/agent-worker/agent-worker/natsbus/subject"
)

// The router is one ordered consumer per replica over the whole input
// stream: for each message it notes the newest sequence seen on every
// input the subject belongs to — an agent's inbox or deferred subject, or
// the subscribe: subjects that match it — hands the message to the
// window (window.go) when this replica serves the agent, and wakes the
// agent when the input wakes it. The agent's loop reads the message from
// the window, or from the log when the window does not hold it. Input for
// an agent that is not configured is dead-lettered (unknown.go). With the
// window off, the router asks for headers only.
//
// Every replica routes every message, for every agent, so an agent that
// moves here knows what its log holds at once; the cost is one atomic
// store per bound input a message reaches, whatever the number of agents.

// routerHeartbeat is how often the server tells the router's pulls it is
// there while no message comes; two missed, the ordered consumer starts
// again after the last sequence it routed. With nats.go's defaults (a
// 30 s pull expiry, a heartbeat missed after ~10 s) every agent's news
// waited ~10 s when a pull's answer went missing in a burst: one make
// bench burst round in three took 11 s instead of 1.3 s, the process
// idle, "router: consumer error ... no heartbeat received" logged. Now
// such a round takes ~3 s. Why the answer goes missing is not known yet.
const (
	routerHeartbeat  = time.Second
	routerPullExpiry = 5 * time.Second
)

// Each replica's router is an ordered consumer with a name of its own
// (nats.go's random prefix): replicas must not share one.
// startRouter starts the router after sequence last.
func (b *Binding) startRouter(ctx context.Context, last uint64) error {
	c, err := b.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:   last + 1,
		HeadersOnly:   b.win.max <= 0,
	})
	if err != nil {
		return fmt.Errorf("router over %s: %w", b.opts.Stream, err)
	}
	cc, err := c.Consume(func(m jetstream.Msg) {
		meta, err := m.Metadata()
		if err != nil {
			b.opts.Log.Warn("router: a message without its JetStream metadata; skipped", "subject", m.Subject(), "error", err)
			return
		}
		var at time.Time
		if m.Headers().Get(nats.MsgIdHdr) != "" {
			at = meta.Timestamp
		}
		dm := &natsbus.DirectMsg{Subject: m.Subject(), Seq: meta.Sequence.Stream, Time: meta.Timestamp, Header: m.Headers(), Data: m.Data()}
		b.route(m.Subject(), meta.Sequence.Stream, false, at, dm)
		raise(&b.routed, meta.Sequence.Stream)
	}, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		b.opts.Log.Warn("router: consumer error; it recovers by itself, missing nothing", "stream", b.opts.Stream, "error", err)
	}), jetstream.PullExpiry(routerPullExpiry), jetstream.PullHeartbeat(routerHeartbeat))
	if err != nil {
		return fmt.Errorf("router over %s: %w", b.opts.Stream, err)
	}
	b.router = cc
	return nil
}

// How route placed a subject.
type routing int

const (
	routed   routing = iota // to one or more configured agents' inputs
	unknown                 // under the prefix, for an agent not configured
	unrouted                // no agent binds it
)

// route notes a message at seq on subj, stored at idAt when it has a
// Nats-Msg-Id (zero: it has none); m is the message (nil with the window
// off). hint: seq is not the message's own sequence but the stream's last
// at the start, at or below which messages of subj wait.
func (b *Binding) route(subj string, seq uint64, hint bool, idAt time.Time, m *natsbus.DirectMsg) routing {
	if name, kind, ok := b.opts.Subjects.Agent(subj); ok {
		a := b.agent(name)
		if a == nil {
			b.queueUnknown(unknownMsg{subject: subj, seq: seq, upTo: hint})
			return unknown
		}
		in := a.inputs[0]
		if kind == "deferred" {
			in = a.inputs[1]
		}
		b.saw(in, seq, hint, idAt, m)
		return routed
	}
	r := unrouted
	for _, p := range b.roster.Load().patterns {
		if subject.Match(p.subject, subj) {
			for _, in := range p.inputs {
				b.saw(in, seq, hint, idAt, m)
			}
			r = routed
		}
	}
	return r
}

// saw notes seq on in, and wakes its agent when in wakes it and the agent
// is served here. The window gets the message before seen moves: a
// reader that sees seq finds it there.
func (b *Binding) saw(in *input, seq uint64, hint bool, idAt time.Time, m *natsbus.DirectMsg) {
	if !idAt.IsZero() && b.opts.DuplicateWindow > 0 {
		in.ids.add(seq, idAt)
	}
	if hint {
		b.win.lack(in, seq)
		raise(&in.hint, seq)
	} else {
		if m != nil {
			b.win.add(in, *m, in.agent.owned.Load())
		}
		raise(&in.seen, seq)
	}
	in.dirty.Store(true)
	if in.agent.owned.Load() {
		// Deferred news too: the loop reads it into the inbox (up to its
		// cap) without a wake, so the inbox view shows it.
		in.agent.to().Notify()
	}
}
