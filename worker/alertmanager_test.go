package worker

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// amPayload is an Alertmanager webhook notification of the "DiskFull"
// group: n alerts, the first starting at start, all firing or all
// resolved.
func amPayload(t *testing.T, n int, start time.Time, resolved bool) string {
	t.Helper()
	status, ends := "firing", "0001-01-01T00:00:00Z"
	if resolved {
		status, ends = "resolved", start.Add(time.Hour).Format(time.RFC3339)
	}
	var alerts []map[string]any
	for i := range n {
		alerts = append(alerts, map[string]any{
			"status":      status,
			"labels":      map[string]string{"alertname": "DiskFull", "severity": []string{"critical", "warning"}[i%2], "instance": fmt.Sprintf("db-%d", i), "mountpoint": "/var/lib/postgresql/data"},
			"annotations": map[string]string{"summary": fmt.Sprintf("/var/lib/postgresql/data on db-%d is above 90%% and still filling up at the current write rate", i)},
			"startsAt":    start.Add(time.Duration(i) * time.Second).Format(time.RFC3339),
			"endsAt":      ends,
			"fingerprint": fmt.Sprintf("%016x", i+1),
		})
	}
	data, err := json.Marshal(map[string]any{
		"version": "4", "groupKey": `{}:{alertname="DiskFull"}`, "status": status, "receiver": "oncall",
		"groupLabels": map[string]string{"alertname": "DiskFull"}, "commonLabels": map[string]string{"alertname": "DiskFull"},
		"externalURL": "http://alertmanager:9093", "alerts": alerts,
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// notify posts a notification to the worker's receiver for triage and
// returns the status and the decoded answer.
func (r *running) notify(payload string) (int, map[string]any) {
	r.t.Helper()
	resp, err := http.Post("http://"+r.w.APIAddr()+"/v1/alertmanager/triage", "application/json", strings.NewReader(payload))
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		r.t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		r.t.Fatalf("answer %d %s: %v", resp.StatusCode, body, err)
	}
	return resp.StatusCode, m
}

// metric waits until the worker's series with labels reaches want.
func (r *running) metric(name string, labels map[string]string, want float64) {
	r.t.Helper()
	wait.Within(r.t, deadline, fmt.Sprintf("%s%v = %v", name, labels, want), func() bool { return value(r.t, scrape(r.t, r), name, labels) == want })
}

// A notification whose turn ran is a duplicate after a restart too,
// within the stream's duplicate window: the log keeps a message with an
// id that long after it was handled, so the restarted server still knows
// the id, and the API answers 200 duplicate instead of 202 and a second
// turn. The same alert re-fired (a new startsAt) is new and wakes the
// agent, with the alertmanager wake source.
func TestAlertmanagerNotificationAcrossARestart(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	t0 := time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)
	fired := amPayload(t, 1, t0, false)

	rec := newRecorder()
	r := start(t, writeConfig(t, setup{dataDir: dataDir}), rec, nil)
	code, first := r.notify(fired)
	if code != http.StatusAccepted || first["status"] != "queued" || first["kind"] != "inbox" {
		t.Fatalf("first: %d %v", code, first)
	}
	r.waitEvent(events.TurnCompleted)
	p := rec.prompt(0)
	for _, want := range []string{"[wake: Alertmanager notification]", "via: alertmanager", "receiver: oncall", `group_key: {}:{alertname="DiskFull"}`, "FIRING DiskFull severity=critical instance=db-0"} {
		if !strings.Contains(p, want) {
			t.Fatalf("prompt lacks %q:\n%s", want, p)
		}
	}
	r.metric("agent_worker_wakes_total", map[string]string{"agent": "triage", "source": "alertmanager"}, 1)
	r.metric("agent_worker_wakes_total", map[string]string{"agent": "triage", "source": "inbox"}, 0)
	r.metric("agent_worker_alertmanager_notifications_total", map[string]string{"agent": "triage", "outcome": "accepted"}, 1)
	r.metric("agent_worker_http_requests_total", map[string]string{"route": "POST /v1/alertmanager/{name}", "code": "202"}, 1)
	r.stop() // the turn is recorded with the cursor past the message

	rec2 := newRecorder()
	r2 := start(t, writeConfig(t, setup{dataDir: dataDir}), rec2, nil)
	code, again := r2.notify(fired)
	if code != http.StatusOK || again["status"] != "duplicate" || again["reason"] != "stream" || again["id"] != first["id"] {
		t.Fatalf("the same notification after a restart: %d %v, want 200 duplicate (stream) of %v", code, again, first["id"])
	}
	r2.metric("agent_worker_alertmanager_notifications_total", map[string]string{"agent": "triage", "outcome": "duplicate"}, 1)

	code, refired := r2.notify(amPayload(t, 1, t0.Add(2*time.Hour), false))
	if code != http.StatusAccepted || refired["id"] == first["id"] {
		t.Fatalf("re-fired: %d %v", code, refired)
	}
	r2.waitEvent(events.TurnCompleted)
	if rec2.calls() != 1 || !strings.Contains(rec2.prompt(0), "since 2026-11-29T09:00:00Z") {
		t.Fatalf("%d model calls after a restart; prompts:\n%s", rec2.calls(), rec2.all())
	}
}

// A notification larger than nats.max_message_bytes (4 KiB here) is cut
// to fit it and reaches the agent; before, the API queued it whole and
// the binding dead-lettered it as too large, after answering 202.
func TestLargeNotificationIsCutToTheNATSLimit(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	r := start(t, writeConfig(t, setup{}), rec, nil) // nats.max_message_bytes 4096
	payload := amPayload(t, 40, time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC), false)
	code, a := r.notify(payload)
	if code != http.StatusAccepted || a["truncated"] == nil {
		t.Fatalf("%d %v, want 202 with alerts truncated", code, a)
	}
	r.waitEvent(events.TurnCompleted)
	p := rec.prompt(0)
	if !strings.Contains(p, fmt.Sprintf("(%v more alerts not shown: ", a["truncated"])) || !strings.Contains(p, "truncated: ") {
		t.Fatalf("prompt does not say alerts were left out:\n%s", p)
	}
	if strings.Contains(p, "severity=warning") {
		t.Fatalf("a warning shown while critical alerts were left out:\n%s", p)
	}
	r.metric("agent_worker_alertmanager_notifications_total", map[string]string{"agent": "triage", "outcome": "truncated"}, 1)
	r.metric("agent_worker_messages_rejected_total", map[string]string{"agent": "triage", "reason": "too_large"}, 0)
}

// agents[].wake_on_resolved: an all-resolved notification wakes the agent.
func TestWakeOnResolved(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	r := start(t, writeConfig(t, setup{agent: "    wake_on_resolved: true"}), rec, nil)
	code, a := r.notify(amPayload(t, 2, time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC), true))
	if code != http.StatusAccepted || a["kind"] != "inbox" {
		t.Fatalf("%d %v, want 202 inbox", code, a)
	}
	r.waitEvent(events.TurnCompleted)
	if p := rec.prompt(0); !strings.Contains(p, "RESOLVED DiskFull") {
		t.Fatalf("prompt:\n%s", p)
	}
}
