package worker

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// Webhooks follow the config: a webhook added by a reload has its
// metrics series at 0 at once, answers 202 and wakes its agent with the
// rendered text; a reload that changes its template renders the new
// text; a reload that removes it makes it answer 404 (its series keep
// their last values). A reload that sets wake_on_resolved makes an
// all-resolved Alertmanager notification wake the agent, where it was
// deferred before.
func TestReloadAddsChangesAndRemovesAWebhook(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	s := setup{dataDir: t.TempDir()}
	version := func(agent, hooks string) setup {
		v := s
		v.agent = agent + hooks // after the agents: the models' lines stay put
		return v
	}
	r := start(t, writeConfig(t, version("", "")), rec, nil)
	wait.Within(t, deadline, "triage owned", func() bool { return r.w.Leases().Held("triage") })
	const accepted = `agent_worker_webhook_notifications_total{outcome="accepted",webhook="ci"}`
	if _, there := metricSeries(t, r.w)[accepted]; there {
		t.Fatal("a series for a webhook not configured yet")
	}
	if code, _ := r.post("", "/v1/webhooks/ci", `{"status": "red"}`); code != http.StatusNotFound {
		t.Fatalf("ci before the reload: %d, want 404", code)
	}
	resolvedAt := time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)
	if code, a := r.notify(amPayload(t, 1, resolvedAt, true)); code != http.StatusAccepted || a["kind"] != "deferred" {
		t.Fatalf("all-resolved before wake_on_resolved: %d %v, want 202 deferred", code, a)
	}

	reload := func(v setup, want func(Change) bool) {
		t.Helper()
		ch, err := r.w.Reload(context.Background(), writeConfig(t, v), "test")
		if err != nil || !want(ch) {
			t.Fatalf("reload: %+v %v", ch, err)
		}
	}
	// Added.
	reload(version("", "webhooks:\n  ci: {agent: triage, text: \"CI {{.status}}\"}\n"),
		func(ch Change) bool { return fmt.Sprint(ch.Webhooks.Added) == "[ci]" && len(ch.Changed) == 0 })
	if v, there := metricSeries(t, r.w)[accepted]; !there || v != 0 {
		t.Fatalf("the added webhook's series: %v %v, want 0 at once", v, there)
	}
	if code, a := r.post("", "/v1/webhooks/ci", `{"status": "red"}`); code != http.StatusAccepted || a["kind"] != "inbox" {
		t.Fatalf("ci after the add: %d %v", code, a)
	}
	r.waitEvent(events.TurnCompleted)
	if p := rec.prompt(rec.calls() - 1); !strings.Contains(p, "> CI red\n") || !strings.Contains(p, "[wake: inbox message]") {
		t.Fatalf("the webhook's turn:\n%s", p)
	}

	// Changed template.
	reload(version("", "webhooks:\n  ci: {agent: triage, text: \"Build {{.status}}!\"}\n"),
		func(ch Change) bool { return fmt.Sprint(ch.Webhooks.Changed) == "[ci]" })
	if code, _ := r.post("", "/v1/webhooks/ci", `{"status": "blue"}`); code != http.StatusAccepted {
		t.Fatalf("ci after the change: %d", code)
	}
	r.waitEvent(events.TurnCompleted)
	if p := rec.prompt(rec.calls() - 1); !strings.Contains(p, "> Build blue!\n") || strings.Contains(p, "CI blue") {
		t.Fatalf("the changed webhook's turn:\n%s", p)
	}

	// Removed, and wake_on_resolved set (triage changed).
	reload(version("    wake_on_resolved: true\n", ""),
		func(ch Change) bool {
			return fmt.Sprint(ch.Webhooks.Removed) == "[ci]" && fmt.Sprint(ch.Changed) == "[triage]"
		})
	if code, _ := r.post("", "/v1/webhooks/ci", `{"status": "green"}`); code != http.StatusNotFound {
		t.Fatalf("ci after the removal: %d, want 404", code)
	}
	if v := metricSeries(t, r.w)[accepted]; v != 2 {
		t.Fatalf("the removed webhook's accepted count %v, want its last value 2", v)
	}
	if code, a := r.notify(amPayload(t, 1, resolvedAt.Add(time.Hour), true)); code != http.StatusAccepted || a["kind"] != "inbox" {
		t.Fatalf("all-resolved after wake_on_resolved: %d %v, want 202 inbox", code, a)
	}
}
