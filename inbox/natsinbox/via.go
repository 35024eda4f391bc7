package natsinbox

import (
	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/seal"
)

// HeaderVia on an inbound message names the worker receiver it came
// through: "alertmanager" (inbox.ViaAlertmanager) when the worker's API
// publishes an Alertmanager notification, inbox.ViaSubagent on a subagent's
// report. The log copies it into inbox.Message.Via only when the
// message carries the deployment's seal over it (package seal; SealVia):
// a NATS publisher can set any header, and a report's id reaches the
// parent's wake line. A claim without a valid seal is ignored — the
// message is delivered as any other, from "nats:<subject>" — and logged,
// and the message-unsealed event counts it.
const HeaderVia = "Agent-Worker-Via"

// HeaderSender on an inbound message is who the worker's API
// authenticated as its sender (inbox.Message.Sender: "api, token ops"),
// set by the API's publish. Like HeaderVia, the log copies it only under
// the deployment's seal: a stranger publishing on NATS can write the
// header but not seal it, so an authenticated sender in the prompt is
// always the worker's word. A claim without a valid seal is ignored,
// logged and counted as HeaderVia's is.
//
// Why a seal and not "trust the API's own publish": the API's message
// reaches the owner through the stream, from any replica, and nothing in
// a stored message says who published it but what it carries.
const HeaderSender = "Agent-Worker-Sender"

// sealedHeaders are the headers a seal covers, besides subject and body:
// the claim and the id the claim puts in the prompt — and the sender when
// the message carries one (sealedWithSender), so that a sender can be
// neither added to a sealed message nor taken off one, and the seals of
// messages without a sender are those of the versions before it.
var (
	sealedHeaders    = []string{HeaderVia, nats.MsgIdHdr}
	sealedWithSender = []string{HeaderVia, nats.MsgIdHdr, HeaderSender}
)

// sealedOf returns the headers the seal of a message with headers h
// covers.
func sealedOf(h nats.Header) []string {
	if h.Get(HeaderSender) != "" {
		return sealedWithSender
	}
	return sealedHeaders
}

// SealVia seals m, a message the worker publishes with HeaderVia or
// HeaderSender set (its Nats-Msg-Id and data set first), so that the log
// grants its claims.
func SealVia(k seal.Key, m *nats.Msg) { k.SealMsg(m, sealedOf(m.Header)...) }

// claims returns the inbox.Message.Via and Sender of a message on subject
// with headers h and body data: the HeaderVia claim when it is one the log
// knows, and the HeaderSender claim, when the message is sealed by this
// deployment; else "". An unsealed claim is logged and emitted
// (message-unsealed) for agent.
func (b *Binding) claims(agent, subject string, h nats.Header, data []byte) (via, sender string) {
	v, s := h.Get(HeaderVia), h.Get(HeaderSender)
	if v != inbox.ViaAlertmanager && v != inbox.ViaSubagent {
		v = ""
	}
	if v == "" && s == "" {
		return "", ""
	}
	if b.opts.Seal.CheckMsg(subject, h, data, sealedOf(h)...) {
		return v, s
	}
	b.opts.Log.Warn("message claims to come from the worker without its seal; delivered as an ordinary message", "agent", agent,
		"subject", subject, "via", v, "sender", s, "id", h.Get(nats.MsgIdHdr))
	b.emit(agent, events.MessageUnsealed, map[string]any{"subject": subject, "via": v, "sender": s, "id": h.Get(nats.MsgIdHdr)})
	return "", ""
}

// source is inbox.Message.Source of a message on subject with id, its Via
// granted: "nats:<subject>", or "subagent:<id>" for a subagent's report.
func source(subject, via, id string) string {
	if via == inbox.ViaSubagent && id != "" {
		return "subagent:" + id
	}
	return inbox.SourceNATSPrefix + subject
}
