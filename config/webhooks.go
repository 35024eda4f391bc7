package config

import (
	"strings"

	"github.com/agent-worker/agent-worker/webhook"
)

// Webhook is one generic webhook (webhooks.<name>): POST
// /v1/webhooks/<name> turns a JSON body into a message for Agent. Its
// name is a URL path token and a metric label ([a-z0-9_-]).
type Webhook struct {
	// Agent is the name of the agent the message is for. Required.
	Agent string `yaml:"agent"`
	// Format is how the body is read: "json" (any JSON; Text renders it),
	// "grafana" (Grafana's alerting webhook) or "alertmanager" (an
	// Alertmanager webhook, version 4). Default "json".
	Format string `yaml:"format"`
	// Text is a Go text/template over the decoded body (missingkey=error)
	// whose output is the message text. Required for json; for grafana
	// and alertmanager it replaces the built-in compact rendering.
	Text string `yaml:"text"`
	// ID is a Go text/template over the decoded body whose output is the
	// message id, deduplicated per agent. Empty: for json a hash of the
	// body (an identical body is a duplicate); for grafana and
	// alertmanager the id the Alertmanager receiver derives.
	ID string `yaml:"id"`
	// Mode is "inbox" (the message wakes the agent; default) or
	// "deferred" (it waits for the next turn).
	Mode string `yaml:"mode"`
}

// WebhookFormats are the values webhooks.<name>.format accepts.
var WebhookFormats = []string{"json", "grafana", "alertmanager"}

// applyWebhookDefaults fills format and mode.
func applyWebhookDefaults(c *Config) {
	for name, w := range c.Webhooks {
		if w.Format == "" {
			w.Format = "json"
		}
		if w.Mode == "" {
			w.Mode = "inbox"
		}
		c.Webhooks[name] = w
	}
}

// webhooks checks every webhooks.<name>: its name, agent, format, mode,
// and that its templates parse (webhook.Parse, as the API parses them).
func (v *validator) webhooks(c *Config) {
	for _, name := range sortedKeys(c.Webhooks) {
		w, p := c.Webhooks[name], path{"webhooks"}.key(name)
		if !namePattern.MatchString(name) {
			v.at(p, "webhook name %q must match %s (it is a URL path token and labels metrics)", name, namePattern)
		}
		switch _, ok := c.Agent(w.Agent); {
		case w.Agent == "":
			v.at(p.key("agent"), "required: the name of the agent the webhook's messages are for")
		case !ok:
			v.at(p.key("agent"), "unknown agent %q (agents: %s)", w.Agent, strings.Join(agentNames(c), ", "))
		}
		v.oneOf(p.key("format"), w.Format, WebhookFormats)
		v.oneOf(p.key("mode"), w.Mode, subscribeModes)
		if w.Format == "json" && strings.TrimSpace(w.Text) == "" {
			v.at(p.key("text"), "required with format json: a Go template over the JSON body, such as \"{{.repository}}: build {{.status}}\"")
		}
		for _, t := range []struct{ key, src string }{{"text", w.Text}, {"id", w.ID}} {
			if t.src == "" {
				continue
			}
			if _, err := webhook.Parse(p.key(t.key).String(), t.src); err != nil {
				v.at(p.key(t.key), "template does not parse: %v", err)
			}
		}
	}
}

// agentNames lists the configured agents' names, in order.
func agentNames(c *Config) []string {
	names := make([]string, 0, len(c.Agents))
	for _, a := range c.Agents {
		names = append(names, a.Name)
	}
	return names
}
