package natsbus

import (
	"net/textproto"
	"strings"
)

// MsgID is the Nats-Msg-Id the worker publishes a message with id into
// agent's input under: "<agent>/<id>". JetStream deduplicates
// Nats-Msg-Id across the whole stream, not per subject, so the plain id
// would make one agent's message the duplicate of another's; agent names
// never hold "/", so the keys of two agents never meet. The message's
// envelope carries the plain id, which is what the agent knows it by
// (PlainMsgID). An empty id has no key: "".
func MsgID(agent, id string) string {
	if id == "" {
		return ""
	}
	return agent + "/" + id
}

// PlainMsgID is the id agent knows a message by whose Nats-Msg-Id is
// header and whose envelope's id is bodyID: bodyID when header is
// MsgID(agent, bodyID) as a NATS header carries it (the worker's
// publishes, or a publisher keying its own the same way), else header as
// it is — a bare Nats-Msg-Id from a version that published the plain id,
// or any other publisher's key.
func PlainMsgID(agent, header, bodyID string) string {
	if bodyID != "" && header == headerValue(MsgID(agent, bodyID)) {
		return bodyID
	}
	return header
}

// headerValue is v as it arrives in a NATS header: nats.go writes line
// breaks as spaces and trims the ends, so an id with a line break can be
// matched only in that form.
func headerValue(v string) string {
	return textproto.TrimString(newlineToSpace.Replace(v))
}

var newlineToSpace = strings.NewReplacer("\r", " ", "\n", " ")
