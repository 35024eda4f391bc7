package worker

import (
	"maps"
	"slices"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/config"
)

// webhooks are the config's generic webhooks as the API serves them.
func webhooks(cfg *config.Config) map[string]api.Webhook {
	out := make(map[string]api.Webhook, len(cfg.Webhooks))
	for name, w := range cfg.Webhooks {
		out[name] = api.Webhook{Agent: w.Agent, Format: w.Format, Text: w.Text, ID: w.ID, Deferred: w.Mode == "deferred"}
	}
	return out
}

// webhookNames are the configured webhooks' names, sorted: the bound of
// the webhook label of agent_worker_webhook_notifications_total.
func webhookNames(cfg *config.Config) []string {
	return slices.Sorted(maps.Keys(cfg.Webhooks))
}

// wakeOnResolved are the agents an all-resolved Alertmanager or Grafana
// notification wakes (agents[].wake_on_resolved).
func wakeOnResolved(cfg *config.Config) map[string]bool {
	out := map[string]bool{}
	for _, a := range cfg.Agents {
		if a.WakeOnResolved {
			out[a.Name] = true
		}
	}
	return out
}

// wakeOnResolvedNames are wakeOnResolved's agents, sorted (for the log).
func wakeOnResolvedNames(cfg *config.Config) []string {
	return slices.Sorted(maps.Keys(wakeOnResolved(cfg)))
}
