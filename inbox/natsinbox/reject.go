package natsinbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/internal/textclip"
	"github.com/agent-worker/agent-worker/natsbus"
	"github.com/agent-worker/agent-worker/turnlog"
)

// Header names on dead-lettered messages.
const (
	HeaderRejectReason    = "Agent-Worker-Reject-Reason"
	HeaderRejectDetail    = "Agent-Worker-Reject-Detail"
	HeaderOriginalSubject = "Agent-Worker-Original-Subject"
	HeaderAgent           = "Agent-Worker-Agent"
)

// RejectUnknownAgent is the reject reason for input addressed to an agent
// that is not configured.
const RejectUnknownAgent = "unknown_agent"

// DeadLetter publishes m, a message of the agent's log that leaves it
// without a turn (given up, or abandoned by an operator), to the agent's
// dead-letter subject with reason and detail — its body and headers as
// the log holds them — and returns once the dead-letter stream stored it.
// Dead-lettering the same message again (a crash before the agent's
// cursors passed it) is a duplicate the dead-letter stream drops within
// its duplicate window.
func (b *Binding) DeadLetter(ctx context.Context, agent string, m inbox.Message, reason, detail string) error {
	data, h, subj := []byte(m.Text), nats.Header(nil), m.Source
	key := ""
	if m.Pos.InLog() && b.stream != nil {
		key = deadLetterKey(b.opts.Stream, m.Pos.Seq, agent)
		res, err := natsbus.DirectBatch(ctx, b.nc, natsbus.DirectRequest{Stream: b.opts.Stream, Filter: m.Pos.Input, From: m.Pos.Seq, Batch: 1})
		if err != nil {
			return fmt.Errorf("dead-letter message %d of %s: read it: %w", m.Pos.Seq, agent, err)
		}
		if len(res.Msgs) == 1 && res.Msgs[0].Seq == m.Pos.Seq {
			data, h, subj = res.Msgs[0].Data, res.Msgs[0].Header, res.Msgs[0].Subject
		}
	}
	return b.reject(agent, m.ID, subj, data, h, &inbox.RejectError{Reason: reason, Detail: detail}, key)
}

// refuse dead-letters dm, a message of the agent's log whose body cannot
// be used (why). Until that worked the message is not passed: an error
// leaves it in the log, to be read again.
func (b *Binding) refuse(agent string, dm natsbus.DirectMsg, why error) error {
	id := refusedID(agent, dm.Header, dm.Data, b.opts.Stream, dm.Seq)
	return b.reject(agent, id, dm.Subject, dm.Data, dm.Header, why, deadLetterKey(b.opts.Stream, dm.Seq, agent))
}

// deadLetterKey is the Nats-Msg-Id a dead letter of the message at seq of
// stream gets for agent: the same message dead-lettered twice is kept once.
func deadLetterKey(stream string, seq uint64, agent string) string {
	return fmt.Sprintf("%s-%d-%s", stream, seq, agent)
}

func rejectReason(err error) string {
	var re *inbox.RejectError
	if errors.As(err, &re) {
		return re.Reason
	}
	return "invalid"
}

// reject publishes the original body to the agent's dead-letter subject
// with the reason; key, when set, is its Nats-Msg-Id in the dead-letter
// stream (deadLetterKey). A dead letter stored now (not a duplicate) is
// logged and announced (message-rejected), and for a configured agent a
// message with an id is also recorded in the store (turnlog.DeadLetter,
// kept DeadLetterTTL), so GET /v1/agents/{name}/messages/{id} can say why.
// A duplicate (dead-lettered before, and told then) is no error.
func (b *Binding) reject(agent, id, subject string, data []byte, h nats.Header, why error, key string) error {
	reason := rejectReason(why)
	dlq := b.opts.Subjects.DLQ(agent)
	out := nats.NewMsg(dlq)
	for k, vs := range h {
		if !strings.HasPrefix(k, "Nats-") {
			out.Header[k] = vs
		}
	}
	out.Header.Set(HeaderRejectReason, reason)
	out.Header.Set(HeaderRejectDetail, textclip.Bytes(why.Error(), 500, "…"))
	out.Header.Set(HeaderOriginalSubject, subject)
	out.Header.Set(HeaderAgent, agent)
	if id != "" {
		out.Header.Set(HeaderMessageID, id)
	}
	if key != "" {
		out.Header.Set(nats.MsgIdHdr, key)
	}
	out.Data = data
	published := dlq
	var err error
	if b.js != nil {
		// Kept in the dead-letter stream: a publish it confirmed.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var ack *jetstream.PubAck
		ack, err = b.js.PublishMsg(ctx, out)
		cancel()
		switch {
		case errors.Is(err, jetstream.ErrNoStreamResponse):
			// No stream keeps dead letters here (a binding started without
			// the worker's dead-letter stream): published, not kept.
			b.opts.Log.Warn("no stream keeps dead letters on this subject; published without being kept", "subject", dlq)
			err = b.nc.PublishMsg(out)
		case err == nil && ack.Duplicate:
			return nil // dead-lettered before: told then
		}
	} else {
		err = b.nc.PublishMsg(out)
	}
	if err != nil {
		published = ""
		b.opts.Log.Error("dead-letter publish failed", "agent", agent, "id", id, "subject", subject, "reason", reason, "error", err)
	}
	if b.records != nil && b.agent(agent) != nil {
		detail := why.Error()
		if re, ok := errors.AsType[*inbox.RejectError](why); ok {
			detail = re.Detail
		}
		b.records.DeadLetter(agent, turnlog.DeadLetter{ID: id, Reason: reason, Detail: detail, Subject: subject, DLQ: published, At: b.opts.Clock.Now()}, b.opts.DeadLetterTTL)
	}
	if err != nil {
		return err
	}
	b.opts.Log.Warn("message rejected to the dead-letter subject", "agent", agent, "id", id, "subject", subject, "reason", reason, "detail", textclip.Bytes(why.Error(), 200, "…"), "dlq", dlq)
	b.emit(agent, events.MessageRejected, map[string]any{"id": id, "reason": reason, "subject": subject, "dlq": dlq})
	return nil
}
