package api

import "github.com/agent-worker/agent-worker/inbox"

// Authenticated senders of what the API queues (inbox.Message.Sender): the
// worker writes them from the credential that let the request in, never
// from the body, whose "from" stays the sender's own, untrusted claim.
const (
	// senderTokenPrefix starts the sender of a message posted with a
	// token (or a session signed with one): "api, token ops".
	senderTokenPrefix = "api, token "
	// SenderUnauthenticated is the sender of a message posted to an API
	// without tokens (loopback only): nobody was authenticated.
	SenderUnauthenticated = "api, unauthenticated"
)

// sender is the authenticated sender of a message who posted to the API
// (POST messages, the Alertmanager receiver, a webhook): "api, token
// <name>", the name on one line (inbox.Inline) so that it fits a NATS
// header and the prompt's header line; SenderUnauthenticated when no
// token stands for who.
func sender(who caller) string {
	if !who.Authenticated() {
		return SenderUnauthenticated
	}
	return senderTokenPrefix + inbox.Inline(who.Name)
}
