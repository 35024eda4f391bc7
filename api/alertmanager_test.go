package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/inbox"
)

// amAlert and amNotification build webhook payloads (version 4).
type amAlert struct {
	Status      string            `json:"status"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations,omitempty"`
	StartsAt    string            `json:"startsAt"`
	EndsAt      string            `json:"endsAt"`
	Fingerprint string            `json:"fingerprint"`
}

type amNotification struct {
	Version           string            `json:"version"`
	GroupKey          string            `json:"groupKey"`
	Status            string            `json:"status"`
	Receiver          string            `json:"receiver"`
	GroupLabels       map[string]string `json:"groupLabels"`
	CommonLabels      map[string]string `json:"commonLabels"`
	CommonAnnotations map[string]string `json:"commonAnnotations,omitempty"`
	Alerts            []amAlert         `json:"alerts"`
}

var amT0 = time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)

// alert is one alert of the "HighCPU" group: fingerprint fp, started at
// minute start past amT0, firing or resolved.
func alert(fp string, start int, resolved bool) amAlert {
	a := amAlert{
		Status:      "firing",
		Labels:      map[string]string{"alertname": "HighCPU", "severity": "critical", "instance": "web-" + fp},
		Annotations: map[string]string{"summary": "CPU above 95%"},
		StartsAt:    amT0.Add(time.Duration(start) * time.Minute).Format(time.RFC3339),
		EndsAt:      "0001-01-01T00:00:00Z",
		Fingerprint: fp,
	}
	if resolved {
		a.Status = "resolved"
		a.EndsAt = amT0.Add(time.Duration(start+30) * time.Minute).Format(time.RFC3339)
	}
	return a
}

// notification is one notification of the HighCPU group.
func notification(t *testing.T, alerts ...amAlert) string {
	t.Helper()
	status := "resolved"
	for _, a := range alerts {
		if a.Status == "firing" {
			status = "firing"
		}
	}
	data, err := json.Marshal(amNotification{
		Version: "4", GroupKey: `{}:{alertname="HighCPU"}`, Status: status, Receiver: "oncall",
		GroupLabels: map[string]string{"alertname": "HighCPU"}, CommonLabels: map[string]string{"alertname": "HighCPU"},
		Alerts: alerts,
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// answer is a 202 or 200 answer of the receiver.
type answer struct {
	Status    string `json:"status"`
	Queued    bool   `json:"queued"`
	ID        string `json:"id"`
	Duplicate bool   `json:"duplicate"`
	Kind      string `json:"kind"`
	Reason    string `json:"reason"`
	Detail    string `json:"detail"`
	Truncated int    `json:"truncated"`
}

// notify posts a notification for agent and decodes the answer, which
// must have status want.
func (w *world) notify(agent, payload string, want int) answer {
	w.t.Helper()
	r := w.post("/v1/alertmanager/"+agent, payload)
	w.wantStatus(r, want)
	var a answer
	decode(w.t, r.body, &a)
	return a
}

func wantQueued(t *testing.T, a answer, kind string) {
	t.Helper()
	if a.Status != "queued" || !a.Queued || a.Duplicate || a.Kind != kind || !strings.HasPrefix(a.ID, "alertmanager:") {
		t.Fatalf("answer %+v, want queued %s", a, kind)
	}
}

func wantDuplicate(t *testing.T, a answer, id, reason string) {
	t.Helper()
	if a.Status != "duplicate" || a.Queued || !a.Duplicate || a.ID != id || a.Reason != reason || a.Detail == "" || a.Kind != "" {
		t.Fatalf("answer %+v, want duplicate of %s because %s", a, id, reason)
	}
}

// An alert that resolves and fires again (same fingerprint, a new
// startsAt) is a new notification and wakes the agent; a retry or repeat
// of one is a duplicate. Before, the id ignored startsAt, so the re-fired
// notification was answered duplicate and no turn ran.
func TestAlertmanagerRefiredAlertIsNew(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	fired := notification(t, alert("a1", 0, false))
	first := w.notify("alpha", fired, http.StatusAccepted)
	wantQueued(t, first, "inbox")
	wantDuplicate(t, w.notify("alpha", fired, http.StatusOK), first.ID, api.DuplicateWindow)
	w.waitEvent("alpha", events.TurnCompleted)
	w.waitTurnDone("alpha")

	resolved := w.notify("alpha", notification(t, alert("a1", 0, true)), http.StatusAccepted)
	wantQueued(t, resolved, "deferred")

	refired := w.notify("alpha", notification(t, alert("a1", 45, false)), http.StatusAccepted)
	wantQueued(t, refired, "inbox")
	if refired.ID == first.ID || refired.ID == resolved.ID {
		t.Fatalf("re-fired id %s repeats an earlier one (%s, %s)", refired.ID, first.ID, resolved.ID)
	}
	w.waitEvent("alpha", events.TurnCompleted)
	w.waitTurnDone("alpha")
	if n := w.models["alpha"].Calls(); n != 2 {
		t.Fatalf("%d model calls, want 2: one per firing notification", n)
	}
}

// A repeat (repeat_interval: the same alerts, the same startsAt) within
// the dedup window is a duplicate of the first; one after it reaches the
// agent again — the alert is still firing — under the same id (the
// stream's duplicate window would drop it if it were that recent).
func TestAlertmanagerRepeatAfterTheDedupWindowReachesTheAgent(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	payload := notification(t, alert("a1", 0, false), alert("a2", 5, false))
	first := w.notify("alpha", payload, http.StatusAccepted)
	wantDuplicate(t, w.notify("alpha", payload, http.StatusOK), first.ID, api.DuplicateWindow)

	w.clock.Advance(api.DefaultDedupWindow + time.Minute)
	again := w.notify("alpha", payload, http.StatusAccepted)
	if again.ID != first.ID {
		t.Fatalf("the repeat's id %s, want the first's %s", again.ID, first.ID)
	}
	// The same alerts for another agent are another agent's notification.
	wantQueued(t, w.notify("beta", payload, http.StatusAccepted), "inbox")
}

// A group that goes back to a state it had before — firing, resolved,
// firing again with the same startsAt (Alertmanager merging a flapping
// alert) — is new each time it changes, and a retry of each state is a
// duplicate of it.
func TestAlertmanagerResolvedThenFiringIsNew(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	fired := notification(t, alert("a1", 0, false))
	resolved := notification(t, alert("a1", 0, true))
	ids := map[string]bool{}
	newID := func(a answer) {
		t.Helper()
		if ids[a.ID] {
			t.Fatalf("id %s given twice", a.ID)
		}
		ids[a.ID] = true
	}
	one := w.notify("alpha", fired, http.StatusAccepted)
	newID(one)
	two := w.notify("alpha", resolved, http.StatusAccepted)
	newID(two)
	three := w.notify("alpha", fired, http.StatusAccepted)
	wantQueued(t, three, "inbox")
	newID(three)
	wantDuplicate(t, w.notify("alpha", fired, http.StatusOK), three.ID, api.DuplicateWindow)
	four := w.notify("alpha", resolved, http.StatusAccepted)
	wantQueued(t, four, "deferred")
	newID(four)
	wantDuplicate(t, w.notify("alpha", resolved, http.StatusOK), four.ID, api.DuplicateWindow)
	// The alert fires again for real: a new startsAt.
	newID(w.notify("alpha", notification(t, alert("a1", 90, false)), http.StatusAccepted))
}

// bigAlerts returns n alerts with many long labels and a long summary,
// severities cycling warning, critical, info, none, error, and every
// third resolved.
func bigAlerts(n int) []amAlert {
	sev := []string{"warning", "critical", "info", "", "error"}
	var out []amAlert
	for i := range n {
		a := alert(fmt.Sprintf("%016x", i), i%600, i%3 == 2)
		a.Labels["alertname"] = fmt.Sprintf("Alert%05d", i)
		delete(a.Labels, "severity")
		if s := sev[i%len(sev)]; s != "" {
			a.Labels["severity"] = s
		}
		for _, k := range []string{"pod", "container", "node", "zone", "deployment"} {
			a.Labels[k] = fmt.Sprintf("%s-payments-api-%05d-7f9c8b6d5-x2k4q", k, i)
		}
		a.Annotations["summary"] = strings.Repeat("p99 latency of the payments API is above its objective ", 5)
		out = append(out, a)
	}
	return out
}

// deliveries is an Options.Deliver that keeps what it is given.
type deliveries struct {
	mu   sync.Mutex
	msgs []inbox.Message
	err  error
}

func (d *deliveries) deliver(_ context.Context, agent string, m inbox.Message) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return d.err
	}
	d.msgs = append(d.msgs, m)
	return nil
}

func (d *deliveries) all() []inbox.Message {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.msgs)
}

func (d *deliveries) fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.err = err
}

// checkTruncated checks the one message a truncated notification became:
// it fits, says how many alerts it leaves out, and keeps every critical
// alert when they fit.
func checkTruncated(t *testing.T, a answer, msgs []inbox.Message, alerts int) inbox.Message {
	t.Helper()
	if len(msgs) != 1 {
		t.Fatalf("%d messages queued, want one", len(msgs))
	}
	m := msgs[0]
	data, err := api.EncodeMessage(m)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > api.DefaultMaxMessageBytes {
		t.Fatalf("queued message is %d bytes, over nats.max_message_bytes %d", len(data), api.DefaultMaxMessageBytes)
	}
	shown := strings.Count(m.Text, "\n- ")
	if a.Truncated == 0 || a.Truncated != alerts-shown {
		t.Fatalf("answer says %d truncated; %d of %d alerts shown", a.Truncated, shown, alerts)
	}
	if m.Attributes["truncated"] != strconv.Itoa(a.Truncated) {
		t.Fatalf("truncated attribute %q, want %d", m.Attributes["truncated"], a.Truncated)
	}
	if want := fmt.Sprintf("\n(%d more alerts not shown: ", a.Truncated); !strings.Contains(m.Text, want) {
		t.Fatalf("message does not say how many alerts it leaves out (%q):\n…%s", want, m.Text[max(len(m.Text)-300, 0):])
	}
	if m.Via != inbox.ViaAlertmanager || m.Source != api.SourceAlertmanager || m.Attributes["via"] != "alertmanager" ||
		m.Attributes["receiver"] != "oncall" || m.Attributes["group_key"] != `{}:{alertname="HighCPU"}` {
		t.Fatalf("message via %q source %q attributes %v", m.Via, m.Source, m.Attributes)
	}
	return m
}

// A 150-alert group (over 64 KiB, which used to be refused with 413) is
// taken and becomes one message that fits nats.max_message_bytes: the most
// severe alerts kept, the rest counted.
func TestAlertmanagerLargeGroupBecomesOneTruncatedMessage(t *testing.T) {
	t.Parallel()
	d := &deliveries{}
	w := newWorld(t, api.Options{Deliver: d.deliver})
	alerts := bigAlerts(150)
	payload := notification(t, alerts...)
	if len(payload) <= api.DefaultMaxBody {
		t.Fatalf("payload of %d bytes is no larger than the old limit %d", len(payload), api.DefaultMaxBody)
	}
	a := w.notify("alpha", payload, http.StatusAccepted)
	wantQueued(t, a, "inbox")
	m := checkTruncated(t, a, d.all(), 150)
	for _, al := range alerts {
		if al.Labels["severity"] == "critical" && !strings.Contains(m.Text, " "+al.Labels["alertname"]+" ") {
			t.Fatalf("critical alert %s left out", al.Labels["alertname"])
		}
	}
	if !strings.HasPrefix(m.Text, "Alertmanager notification [FIRING:100, RESOLVED:50]") {
		t.Fatalf("header %q", strings.SplitN(m.Text, "\n", 2)[0])
	}
}

// 10,000 alerts within api.alertmanager_max_bytes are taken and cut to
// one message.
func TestAlertmanagerTenThousandAlertsAreTaken(t *testing.T) {
	t.Parallel()
	d := &deliveries{}
	w := newWorld(t, api.Options{Deliver: d.deliver})
	alerts := make([]amAlert, 0, 10_000)
	for i := range 10_000 {
		a := alert(fmt.Sprintf("%016x", i), i%1000, false)
		a.Labels["instance"] = fmt.Sprintf("web-%d", i)
		out := a
		out.Annotations = nil
		alerts = append(alerts, out)
	}
	payload := notification(t, alerts...)
	if len(payload) > api.DefaultAlertmanagerMaxBytes {
		t.Fatalf("payload of %d bytes is over the limit", len(payload))
	}
	a := w.notify("alpha", payload, http.StatusAccepted)
	checkTruncated(t, a, d.all(), 10_000)
}

// observer is an api.Observer that keeps what it is told.
type observer struct {
	mu       sync.Mutex
	requests []string // "route code"
	outcomes []string // "agent outcome"
	failures []string // the routes of failed authentications
}

func (o *observer) AuthFailure(route string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failures = append(o.failures, route)
}

// authFailures returns the routes of the failed authentications so far.
func (o *observer) authFailures() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.failures)
}

func (o *observer) HTTPRequest(route string, code int, elapsed time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.requests = append(o.requests, fmt.Sprintf("%s %d", route, code))
}

func (o *observer) AlertmanagerNotification(agent, outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.outcomes = append(o.outcomes, agent+" "+outcome)
}

func (o *observer) WebhookNotification(webhook, outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.outcomes = append(o.outcomes, "webhook "+webhook+" "+outcome)
}

// take returns what was observed since the last take.
func (o *observer) take() (requests, outcomes []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	requests, outcomes = o.requests, o.outcomes
	o.requests, o.outcomes = nil, nil
	return requests, outcomes
}

// A payload over api.alertmanager_max_bytes is answered 413 and counted
// rejected.
func TestAlertmanagerOverTheLimitIsRefusedAndCounted(t *testing.T) {
	t.Parallel()
	obs := &observer{}
	w := newWorld(t, api.Options{Observer: obs, AlertmanagerMaxBytes: 1 << 20})
	var p amNotification
	decode(t, []byte(notification(t, alert("a1", 0, false))), &p)
	p.CommonAnnotations = map[string]string{"description": strings.Repeat("x", 1<<20)}
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	r := w.post("/v1/alertmanager/alpha", string(data))
	w.wantStatus(r, http.StatusRequestEntityTooLarge)
	if msg := r.errorText(t); !strings.Contains(msg, "api.alertmanager_max_bytes") || !strings.Contains(msg, strconv.Itoa(1<<20)) {
		t.Fatalf("413 says %q", msg)
	}
	requests, outcomes := obs.take()
	if !slices.Equal(outcomes, []string{"alpha rejected"}) || !slices.Equal(requests, []string{"POST /v1/alertmanager/{name} 413"}) {
		t.Fatalf("observed %q and %q", requests, outcomes)
	}
	if st := w.agent("alpha").Status(); st.InboxPending != 0 || st.Deferred != 0 {
		t.Fatalf("a refused payload was queued: %+v", st)
	}
}

// Every answer reaches the Observer with a bounded route, and each
// receiver request naming a configured agent with its outcome.
func TestAlertmanagerOutcomesAreObserved(t *testing.T) {
	t.Parallel()
	obs := &observer{}
	w := newWorld(t, api.Options{
		Observer:        obs,
		MaxMessageBytes: 8 << 10,
		Tokens:          withTokens(api.Token{Name: "am", Role: api.RoleIngest, Value: alphaIngestToken, Agents: []string{"alpha"}}),
	})
	const route = "POST /v1/alertmanager/{name}"
	payload := notification(t, alert("a1", 0, false))
	w.notify("alpha", payload, http.StatusAccepted)
	w.notify("alpha", payload, http.StatusOK)
	w.notify("alpha", notification(t, bigAlerts(40)...), http.StatusAccepted) // cut to 8 KiB
	w.wantStatus(w.post("/v1/alertmanager/alpha", `{"text": "not a notification"}`), http.StatusBadRequest)
	w.wantStatus(w.call(http.MethodPost, "/v1/alertmanager/alpha", "", "application/json", payload), http.StatusUnauthorized)
	w.wantStatus(w.call(http.MethodPost, "/v1/alertmanager/beta", alphaIngestToken, "application/json", payload), http.StatusForbidden)
	w.wantStatus(w.call(http.MethodPost, "/v1/alertmanager/alpha", alphaIngestToken, "application/json", notification(t, alert("a9", 0, false))), http.StatusAccepted)
	// Not counted: an agent that is not configured, and other routes.
	w.wantStatus(w.post("/v1/alertmanager/nobody", payload), http.StatusNotFound)
	w.wantStatus(w.get("/v1/agents/alpha"), http.StatusOK)
	w.wantStatus(w.get("/no/such/path"), http.StatusNotFound)
	w.wantStatus(w.call(http.MethodGet, "/v1/alertmanager/alpha", readToken, "", ""), http.StatusMethodNotAllowed)

	requests, outcomes := obs.take()
	wantOutcomes := []string{"alpha accepted", "alpha duplicate", "alpha accepted", "alpha truncated", "alpha rejected", "alpha rejected", "beta rejected", "alpha accepted"}
	if !slices.Equal(outcomes, wantOutcomes) {
		t.Errorf("outcomes %q\nwant     %q", outcomes, wantOutcomes)
	}
	wantRequests := []string{route + " 202", route + " 200", route + " 202", route + " 400", route + " 401", route + " 403", route + " 202",
		route + " 404", "GET /v1/agents/{name} 200", "other 404", "other 405"}
	if !slices.Equal(requests, wantRequests) {
		t.Errorf("requests %q\nwant     %q", requests, wantRequests)
	}
	routes := w.srv.Routes()
	if !slices.Contains(routes, route) || !slices.Contains(routes, "GET /metrics") || slices.Contains(routes, api.RouteOther) || !slices.IsSorted(routes) {
		t.Errorf("Routes() = %q", routes)
	}
}

// A transport that already holds the message (JetStream's duplicate
// window) makes a duplicate answer; one that fails makes a 503 whose
// retry is queued, not taken for a duplicate of what was never queued.
func TestAlertmanagerDeliveryDuplicateAndFailure(t *testing.T) {
	t.Parallel()
	d := &deliveries{}
	w := newWorld(t, api.Options{Deliver: d.deliver})
	payload := notification(t, alert("a1", 0, false))

	d.fail(errors.New("nats: no responders available for request"))
	r := w.post("/v1/alertmanager/alpha", payload)
	w.wantStatus(r, http.StatusServiceUnavailable)
	if r.header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	d.fail(nil)
	queued := w.notify("alpha", payload, http.StatusAccepted)
	wantQueued(t, queued, "inbox")

	d.fail(fmt.Errorf("stream AGENTS: %w", api.ErrDuplicate))
	w2 := newWorld(t, api.Options{Deliver: d.deliver}) // another replica
	wantDuplicate(t, w2.notify("alpha", payload, http.StatusOK), queued.ID, api.DuplicateStream)
	if n := len(d.all()); n != 1 {
		t.Fatalf("%d messages delivered, want 1", n)
	}
}

// wake_on_resolved is per agent: an all-resolved notification wakes the
// agents it names and is deferred for the others.
func TestAlertmanagerWakeOnResolvedPerAgent(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{WakeOnResolved: map[string]bool{"alpha": true}})
	resolved := notification(t, alert("a1", 0, true))
	wantQueued(t, w.notify("alpha", resolved, http.StatusAccepted), "inbox")
	wantQueued(t, w.notify("beta", resolved, http.StatusAccepted), "deferred")
	w.waitEvent("alpha", events.TurnCompleted)
	if st := w.agent("beta").Status(); st.Deferred != 1 || st.PendingWakes != 0 || st.Turns != 0 {
		t.Fatalf("beta woke for a resolved notification: %+v", st)
	}
}

// A notification wakes the agent with its own source, not as an inbox
// message, and the turn says what woke it.
func TestAlertmanagerWakesWithItsOwnSource(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{})
	w.notify("alpha", notification(t, alert("a1", 0, false)), http.StatusAccepted)
	e := w.waitEvent("alpha", events.Wake)
	if e.Data["source"] != string(driver.SourceAlertmanager) {
		t.Fatalf("wake source %v, want alertmanager", e.Data["source"])
	}
	started := w.waitEvent("alpha", events.TurnStarted)
	if wakes, _ := started.Data["wakes"].([]string); len(wakes) != 1 || wakes[0] != "Alertmanager notification" {
		t.Fatalf("turn woke by %v", started.Data["wakes"])
	}
	// A plain message is still an inbox wake.
	w.waitTurnDone("alpha")
	w.wantStatus(w.post("/v1/agents/alpha/messages", `{"text": "hello"}`), http.StatusAccepted)
	if e := w.waitEvent("alpha", events.Wake); e.Data["source"] != string(driver.SourceInbox) {
		t.Fatalf("message wake source %v", e.Data["source"])
	}
}

// A message too large to queue is refused before anything is queued.
func TestMessageTooLargeToQueue(t *testing.T) {
	t.Parallel()
	w := newWorld(t, api.Options{MaxMessageBytes: 512})
	r := w.post("/v1/agents/alpha/messages", `{"text": "`+strings.Repeat("x", 600)+`"}`)
	w.wantStatus(r, http.StatusRequestEntityTooLarge)
	if msg := r.errorText(t); !strings.Contains(msg, "nats.max_message_bytes") {
		t.Fatalf("413 says %q", msg)
	}
	r = w.post("/v1/agents/alpha/messages", `{"text": "fits", "id": "evt-2"}`)
	w.wantStatus(r, http.StatusAccepted)
	if m := r.json(t); m["status"] != "queued" {
		t.Fatalf("answer %s", r.body)
	}
}

// EncodeMessage is read back by the NATS binding's parser as the same
// message, with via and a default from.
func TestEncodeMessageRoundTrips(t *testing.T) {
	t.Parallel()
	m := inbox.Message{ID: "alertmanager:0123456789abcdef", Source: api.SourceAlertmanager, Text: "a <b> & \"c\"\nd",
		Attributes: map[string]string{"receiver": "oncall"}}
	data, err := api.EncodeMessage(m)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), `\u003c`) {
		t.Fatalf("HTML-escaped: %s", data)
	}
	b, err := inbox.ParseBody(data, len(data))
	if err != nil {
		t.Fatal(err)
	}
	if b.Text != m.Text || b.ID != m.ID || b.From != "alertmanager" || b.Attributes["via"] != "alertmanager" || b.Attributes["receiver"] != "oncall" {
		t.Fatalf("read back %+v from %s", b, data)
	}
}
