package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// webhookOutcomes are api.Outcome* of a generic webhook: the Alertmanager
// receiver's, and template_error (api.OutcomeTemplateError).
var webhookOutcomes = []string{"accepted", "duplicate", "rejected", "truncated", "template_error"}

// webhookMetrics count the generic webhooks' requests. The webhook label
// is bounded by the configured webhooks (SetWebhooks).
type webhookMetrics struct {
	notifications *prometheus.CounterVec
	mu            sync.RWMutex
	names         map[string]bool
}

func newWebhookMetrics() *webhookMetrics {
	return &webhookMetrics{
		notifications: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "webhook_notifications_total",
			Help: "Requests to a configured generic webhook (POST /v1/webhooks/{name}), by outcome: accepted (queued, 202), duplicate (already queued or handled, 200), rejected (a 4xx answer: not JSON, not the format's payload, too large, unauthorized, forbidden), template_error (the text or id template failed on the body, 422), truncated (accepted with alerts left out or text cut to fit one message; also counted as accepted)."},
			[]string{"webhook", "outcome"}),
		names: map[string]bool{},
	}
}

// SetWebhooks adds the configured webhooks' names to the webhook label's
// bound and creates their series at 0, so rate() and absent-or-zero
// alerts see a webhook's first request. Names already set stay (a series
// is never removed while the process runs).
func (m *Metrics) SetWebhooks(names []string) {
	m.webhooks.mu.Lock()
	defer m.webhooks.mu.Unlock()
	for _, n := range names {
		m.webhooks.names[n] = true
		for _, o := range webhookOutcomes {
			m.webhooks.notifications.WithLabelValues(n, o)
		}
	}
}

// WebhookNotification counts one outcome of a generic webhook
// (api.Observer). A webhook not set with SetWebhooks is not counted
// (agent_worker_events_dropped_total{reason="unconfigured"}), nor is an
// outcome outside the set.
func (m *Metrics) WebhookNotification(webhook, outcome string) {
	m.webhooks.mu.RLock()
	known := m.webhooks.names[webhook]
	m.webhooks.mu.RUnlock()
	if !known {
		m.drops.unconfigured.Add(1)
		return
	}
	if oneOf(outcome, webhookOutcomes) == other {
		return
	}
	m.webhooks.notifications.WithLabelValues(webhook, outcome).Inc()
}
