package natsinbox

import (
	"github.com/nats-io/nats.go"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/seal"
)

// HeaderVia on an inbound message names the worker receiver it came
// through: "alertmanager" (inbox.ViaAlertmanager) when the worker's API
// publishes an Alertmanager notification, ViaSubagent on a subagent's
// report. The log copies it into inbox.Message.Via only when the
// message carries the deployment's seal over it (package seal; SealVia):
// a NATS publisher can set any header, and a report's id reaches the
// parent's wake line. A claim without a valid seal is ignored — the
// message is delivered as any other, from "nats:<subject>" — and logged,
// and the message-unsealed event counts it.
const HeaderVia = "Agent-Worker-Via"

// ViaSubagent as the HeaderVia value marks a background subagent's report
// (package background publishes it to the parent's inbox subject): the
// log copies it into inbox.Message.Via (driver.ViaSubagent, the same
// value) and the message's source reads "subagent:<id>", so the parent
// wakes with source subagent, as for a report made in its own process.
const ViaSubagent = "subagent"

// sealedHeaders are the headers a seal covers, besides subject and body:
// the claim and the id the claim puts in the prompt.
var sealedHeaders = []string{HeaderVia, nats.MsgIdHdr}

// SealVia seals m, a message the worker publishes with HeaderVia set (its
// Nats-Msg-Id and data set first), so that the log grants its claim.
func SealVia(k seal.Key, m *nats.Msg) { k.SealMsg(m, sealedHeaders...) }

// via returns the inbox.Message.Via of a message on subject with headers
// h and body data: the HeaderVia claim when it is one the log knows and
// sealed by this deployment, else "". An unsealed claim is logged and
// emitted (message-unsealed) for agent.
func (b *Binding) via(agent, subject string, h nats.Header, data []byte) string {
	v := h.Get(HeaderVia)
	if v != inbox.ViaAlertmanager && v != ViaSubagent {
		return ""
	}
	if b.opts.Seal.CheckMsg(subject, h, data, sealedHeaders...) {
		return v
	}
	b.opts.Log.Warn("message claims to come from the worker without its seal; delivered as an ordinary message", "agent", agent,
		"subject", subject, "header", HeaderVia+": "+v, "id", h.Get(nats.MsgIdHdr))
	b.emit(agent, events.MessageUnsealed, map[string]any{"subject": subject, "via": v, "id": h.Get(nats.MsgIdHdr)})
	return ""
}

// source is inbox.Message.Source of a message on subject with id, its Via
// granted: "nats:<subject>", or "subagent:<id>" for a subagent's report.
func source(subject, via, id string) string {
	if via == ViaSubagent && id != "" {
		return "subagent:" + id
	}
	return "nats:" + subject
}
