package api

import "strings"

// Message ids are per agent, and each route that makes its own ids keeps
// them in a namespace of its own, so that one route's ids cannot be
// taken through another: a message posted with the id of a notification
// still to come would have that notification dropped as its duplicate
// (the dedup window, the stream's duplicate window). POST
// /v1/agents/{name}/messages lets the caller choose the id, so it
// refuses an id in a reserved namespace (reservedPrefix); the webhooks
// and the Alertmanager receiver derive theirs inside their own.
const (
	// idPrefixWebhook begins every webhook's message id:
	// "webhook:<name>:<id or hash>" (webhookID).
	idPrefixWebhook = "webhook:"
	// idPrefixAlertmanager begins every id the Alertmanager receiver
	// derives (inbox.ParseAlertmanager, returnID), also for the webhooks
	// of format grafana and alertmanager, inside their webhook's id.
	idPrefixAlertmanager = "alertmanager:"
)

// reservedIDs are the namespaces a message's own id may not begin with,
// and the route that owns each.
var reservedIDs = []struct{ prefix, route string }{
	{idPrefixWebhook, "the webhooks (" + webhookRoute + ")"},
	{idPrefixAlertmanager, "the Alertmanager receiver (" + alertmanagerRoute + ")"},
}

// reservedPrefix returns the reserved namespace id begins with, compared
// without regard to case, and the route that owns it; "" when id is free
// to take.
func reservedPrefix(id string) (prefix, owner string) {
	for _, r := range reservedIDs {
		if len(id) >= len(r.prefix) && strings.EqualFold(id[:len(r.prefix)], r.prefix) {
			return r.prefix, r.route
		}
	}
	return "", ""
}

// webhookID is the id of a message of webhook name: rest (its id
// template's output, or a content id) in the webhook's namespace.
func webhookID(name, rest string) string { return idPrefixWebhook + name + ":" + rest }
