package metrics_test

import (
	"strings"
	"testing"

	"github.com/agent-worker/agent-worker/metrics"
)

// Webhook outcomes exist at 0 for every configured webhook from the first
// scrape, count per configured webhook and known outcome only, and a
// name nobody configured creates no series.
func TestWebhookNotificationsByOutcome(t *testing.T) {
	t.Parallel()
	m := metrics.New(testAgents(), nil)
	if n := len(family(series(t, m.Registry()), "agent_worker_webhook_notifications_total")); n != 0 {
		t.Fatalf("%d webhook series before any webhook is configured", n)
	}
	m.SetWebhooks([]string{"ci", "grafana"})
	m.WebhookNotification("ci", "accepted")
	m.WebhookNotification("ci", "truncated")
	m.WebhookNotification("ci", "accepted")
	m.WebhookNotification("grafana", "template_error")
	m.WebhookNotification("evil-name-0001", "accepted") // not configured
	m.WebhookNotification("ci", "exploded")
	got := series(t, m.Registry())
	expect(t, got, map[string]float64{
		`agent_worker_webhook_notifications_total{outcome="accepted",webhook="ci"}`:            2,
		`agent_worker_webhook_notifications_total{outcome="truncated",webhook="ci"}`:           1,
		`agent_worker_webhook_notifications_total{outcome="duplicate",webhook="ci"}`:           0,
		`agent_worker_webhook_notifications_total{outcome="rejected",webhook="grafana"}`:       0,
		`agent_worker_webhook_notifications_total{outcome="template_error",webhook="grafana"}`: 1,
		`agent_worker_events_dropped_total{reason="unconfigured"}`:                             1,
	})
	fam := family(got, "agent_worker_webhook_notifications_total")
	if len(fam) != 2*5 {
		t.Errorf("%d webhook series, want 10: %v", len(fam), fam)
	}
	for k := range fam {
		if strings.Contains(k, "evil") || strings.Contains(k, "exploded") || strings.Contains(k, "other") {
			t.Errorf("unbounded series %s", k)
		}
	}
}
