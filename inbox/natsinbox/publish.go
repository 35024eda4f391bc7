package natsinbox

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/natsbus"
	"github.com/agent-worker/agent-worker/seal"
	"github.com/agent-worker/agent-worker/tracing"
)

// Own is a message the worker itself puts on an agent's input: an
// operator's or an Alertmanager notification that came over the API, or
// a background subagent's report. The log reads it like any other; what
// sets it apart are the claims it carries under the deployment's seal.
type Own struct {
	// Subject is the agent's inbox or deferred subject.
	Subject string
	// Agent and ID make its Nats-Msg-Id (natsbus.MsgID): JetStream
	// deduplicates that across the whole stream, and ids are per agent.
	// No ID: no Nats-Msg-Id.
	Agent, ID string
	// Data is the body, a JSON envelope inbox.ParseBody reads.
	Data []byte
	// Via (HeaderVia) and Sender (HeaderSender) are the claims the log
	// grants only under the seal; "" claims nothing.
	Via, Sender string
	// TraceParent links the agent's turn to the publisher's trace.
	TraceParent string
}

// Msg returns the NATS message of m: its body, Nats-Msg-Id,
// traceparent and claims, sealed with k when it claims anything (SealVia;
// the seal covers the id, so it is set first).
func (m Own) Msg(k seal.Key) *nats.Msg {
	msg := nats.NewMsg(m.Subject)
	msg.Data = m.Data
	if m.ID != "" {
		msg.Header.Set(nats.MsgIdHdr, natsbus.MsgID(m.Agent, m.ID))
	}
	tracing.SetNATS(msg.Header, m.TraceParent)
	if m.Via != "" {
		msg.Header.Set(HeaderVia, m.Via)
	}
	if m.Sender != "" {
		msg.Header.Set(HeaderSender, m.Sender)
	}
	if m.Via != "" || m.Sender != "" {
		SealVia(k, msg)
	}
	return msg
}

// ownPublishTimeout bounds one acknowledged publish of an Own message.
const ownPublishTimeout = 10 * time.Second

// Publish puts m on the agent's input through conn, sealed with k. With
// JetStream it returns only once the stream acknowledged the message
// (within 10 s), so the message is durable; duplicate says the stream
// already held this agent's message with that id, and nothing new was
// queued. A refusal (a full subject or stream) is the server's error
// (natsbus.Full names it). In core NATS mode it is a plain publish.
func Publish(ctx context.Context, conn *natsbus.Conn, k seal.Key, m Own) (duplicate bool, err error) {
	msg := m.Msg(k)
	if conn.JS == nil {
		return false, conn.NC.PublishMsg(msg)
	}
	ctx, cancel := context.WithTimeout(ctx, ownPublishTimeout)
	defer cancel()
	ack, err := conn.JS.PublishMsg(ctx, msg)
	if err != nil {
		return false, err
	}
	return ack.Duplicate, nil
}
