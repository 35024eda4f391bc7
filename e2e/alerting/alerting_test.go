package alerting

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/internal/wait"
)

// stepDeadline bounds every wait of one step; a wait ends as soon as its
// condition holds. A step takes a few seconds: a scrape (1s), a rule
// evaluation (1s), Alertmanager's group_wait or group_interval (1s).
const stepDeadline = 20 * time.Second

// receiverRoute is the route label of the receiver's requests in
// agent_worker_http_requests_total and _duration_seconds, as the
// dashboard and docs/alertmanager.md use it.
const receiverRoute = "POST /v1/alertmanager/{name}"

// floodSize is how many alerts the big group holds.
const floodSize = 150

// TestAlertmanagerToAgent drives the alerting path end to end with the
// real binaries: exporter → Prometheus (rules) → Alertmanager (grouping,
// repeats, resolved) → the worker's receiver → turns of a scripted model,
// and Prometheus scraping the worker's own metrics. Each step is a
// subtest; the timeline of everything that happened is logged at the end.
func TestAlertmanagerToAgent(t *testing.T) {
	bins := lookBinaries(t)
	tl := newTimeline()
	dir := t.TempDir()

	aw := startWorker(t, dir, tl)
	tl.now("worker started: API %s (tokens: ingest for Alertmanager, read for Prometheus, operate for the test)", aw.url)
	tp := newTap(t, aw.url, tl)
	exp := newExporter(t)
	amConfig := alertmanagerConfig(t, tp.URL(), aw.tokenFile("ingest"))
	amAddr := startAlertmanager(t, bins["prometheus-alertmanager"], dir, amConfig)
	tl.now("alertmanager ready on %s (receiver: %s%s)", amAddr, tp.URL(), receiverPath)
	prom := startPrometheus(t, bins["prometheus"], dir, amAddr, exp.addr(), strings.TrimPrefix(aw.url, "http://"), aw.tokenFile("read"))
	tl.now("prometheus ready on %s", strings.TrimPrefix(prom.base, "http://"))
	defer func() {
		t.Logf("timeline (%s total; notifications go through a tap in front of the receiver):\n%s", tl.since().Round(time.Millisecond), tl)
	}()

	diskFull := series{"disk_full", "db-1", "critical"}
	var flood []series
	for i := 1; i <= floodSize; i++ {
		sev := "warning"
		if i > floodSize-10 {
			sev = "critical" // the last ten in Alertmanager's order (by labels)
		}
		flood = append(flood, series{"node_down", fmt.Sprintf("node-%03d", i), sev})
	}
	exp.set(0, diskFull)
	exp.set(0, flood...)

	ok := t.Run("prometheus scrapes the worker", func(t *testing.T) {
		var last string
		wait.Within(t, stepDeadline, "Prometheus to scrape the worker and the exporter and find Alertmanager", func() bool {
			w, okW, errW := prom.scalar(`up{job="agent-worker"}`)
			e, okE, errE := prom.scalar(`up{job="e2e-exporter"}`)
			am, errA := prom.activeAlertmanagers()
			last = fmt.Sprintf(`up{job="agent-worker"} = %s, up{job="e2e-exporter"} = %s, active Alertmanagers: %d`, show(w, okW, errW), show(e, okE, errE), am)
			if errA != nil {
				last += " (" + errA.Error() + ")"
			}
			return okW && w == 1 && okE && e == 1 && am == 1
		})
		tl.now("prometheus: %s", last)
	})
	if !ok {
		t.Fatal("Prometheus does not scrape the worker: the other steps cannot run")
	}

	var first notification
	t.Run("a firing alert wakes one turn", func(t *testing.T) {
		mark, before := tp.count(), len(aw.rec.turns())
		exp.set(1, diskFull)
		tl.now("exporter: test_alert{name=disk_full,host=db-1,severity=critical} = 1")
		first = tp.next(t, mark, "Alertmanager to post DiskFull firing", about("DiskFull", "firing"))
		if first.Code != 202 || first.Firing != 1 {
			t.Fatalf("notification #%d: %d %s, %d firing alert(s): want 202 for one firing alert", first.N, first.Code, first.Answer, first.Firing)
		}
		if k := first.Reply.Kind; k != "" && k != "inbox" {
			t.Errorf("a firing notification was queued as %q, want inbox (it wakes)", k)
		}
		p := waitTurn(t, aw, before, "FIRING DiskFull")
		for _, want := range []string{"severity=critical", "db-1", "/var on db-1 is full"} {
			if !strings.Contains(p, want) {
				t.Errorf("the turn's prompt lacks %q:\n%s", want, p)
			}
		}
		if n := len(aw.rec.turns()); n != before+1 {
			t.Errorf("%d turns after one firing notification, want %d", n-before, 1)
		}
	})

	t.Run("repeats are duplicates", func(t *testing.T) {
		if first.Body == nil {
			t.Fatal("no first notification to repeat")
		}
		mark, before := tp.count(), len(aw.rec.turns())
		rep := tp.next(t, mark, "Alertmanager to repeat DiskFull (repeat_interval 2s)", about("DiskFull", "firing"))
		if !slices.Equal(rep.StartsAt, first.StartsAt) {
			t.Errorf("the repeat carries startsAt %v, the first %v: not a plain repeat", rep.StartsAt, first.StartsAt)
		}
		if rep.Code != 200 || rep.Outcome != "duplicate" {
			t.Errorf("Alertmanager's repeat #%d answered %d %s, want 200 duplicate", rep.N, rep.Code, rep.Answer)
		}
		again := tp.post(t, receiverPath, aw.tokens["ingest"], first.Body)
		if again.Code != 200 || again.Outcome != "duplicate" {
			t.Errorf("notification #%d posted again answered %d %s, want 200 duplicate", first.N, again.Code, again.Answer)
		}
		if again.Reply.Status != "duplicate" {
			t.Errorf(`a repeat answered %s, want {"status":"duplicate"}`, again.Answer)
		}
		if n := len(aw.rec.turns()); n != before {
			t.Errorf("%d turn(s) after repeats, want none", n-before)
		}
	})

	var resolvedTurns int
	t.Run("all resolved is deferred, no turn", func(t *testing.T) {
		mark, ev, before := tp.count(), aw.eventCount(), len(aw.rec.turns())
		exp.set(0, diskFull)
		tl.now("exporter: test_alert{name=disk_full,...} = 0")
		res := tp.next(t, mark, "Alertmanager to post DiskFull resolved", about("DiskFull", "resolved"))
		if res.Code != 202 {
			t.Fatalf("resolved notification #%d answered %d %s, want 202", res.N, res.Code, res.Answer)
		}
		if k := res.Reply.Kind; k != "" && k != "deferred" {
			t.Errorf("the all-resolved notification was queued as %q, want deferred", k)
		}
		wait.Within(t, stepDeadline, "the worker to queue the resolved notification as deferred", func() bool {
			evs, _ := aw.eventsSince(ev)
			return slices.ContainsFunc(evs, func(e events.Event) bool {
				return e.Type == events.MessageQueued && e.Data["kind"] == "deferred"
			})
		})
		v := aw.agentView(t)
		if v.DeferredPending != 1 || v.InboxPending != 0 {
			t.Errorf("agent %s: %d deferred, %d inbox pending; want the resolved notification deferred (1, 0)", agent, v.DeferredPending, v.InboxPending)
		}
		tl.now("GET /v1/agents/%s: state %s, deferred_pending %d, inbox_pending %d, turns %d", agent, v.State, v.DeferredPending, v.InboxPending, v.Turns)
		resolvedTurns = len(aw.rec.turns())
		if resolvedTurns != before {
			t.Errorf("%d turn(s) after an all-resolved notification, want none", resolvedTurns-before)
		}
	})

	t.Run("firing again is a new notification and a new turn", func(t *testing.T) {
		mark, before := tp.count(), len(aw.rec.turns())
		if resolvedTurns != 0 && before != resolvedTurns {
			t.Errorf("%d turn(s) ran while only the resolved notification was queued, want none", before-resolvedTurns)
		}
		exp.set(1, diskFull)
		tl.now("exporter: test_alert{name=disk_full,...} = 1 again")
		again := tp.next(t, mark, "Alertmanager to post DiskFull firing again", about("DiskFull", "firing"))
		if slices.Equal(again.StartsAt, first.StartsAt) {
			t.Fatalf("the alert fired again with the old startsAt %v", again.StartsAt)
		}
		if again.Outcome == "duplicate" {
			t.Fatalf("notification #%d, the alert firing again (startsAt %v, first %v), answered %d %s: "+
				"a new firing after a resolve must be a new notification (its id must include startsAt)",
				again.N, again.StartsAt, first.StartsAt, again.Code, again.Answer)
		}
		if again.Code != 202 {
			t.Fatalf("notification #%d answered %d %s, want 202", again.N, again.Code, again.Answer)
		}
		p := waitTurn(t, aw, before, "FIRING DiskFull")
		if !strings.Contains(p, "RESOLVED DiskFull") {
			t.Errorf("the turn's prompt lacks the deferred resolved notification:\n%s", p)
		}
	})

	t.Run("150 alerts in one group: one notification, one turn, the rest counted", func(t *testing.T) {
		mark, before := tp.count(), len(aw.rec.turns())
		exp.set(1, flood...)
		tl.now("exporter: %d series test_alert{name=node_down,host=node-001..%03d} = 1 (the last 10 critical, the rest warning)", floodSize, floodSize)
		n := tp.next(t, mark, "Alertmanager to post NodeDown", func(n notification) bool { return slices.Contains(n.Names, "NodeDown") })
		if n.Alerts != floodSize || n.Truncated != 0 {
			t.Errorf("notification #%d carries %d alerts (%d truncated by Alertmanager), want all %d in one", n.N, n.Alerts, n.Truncated, floodSize)
		}
		if n.Code != 202 {
			t.Fatalf("notification #%d (%d alerts, %s) answered %d %s, want 202: payloads up to api.alertmanager_max_bytes are accepted",
				n.N, n.Alerts, kib(len(n.Body)), n.Code, n.Answer)
		}
		p := waitTurn(t, aw, before, "NodeDown")
		shown := strings.Count(p, "- FIRING NodeDown")
		m := regexp.MustCompile(`(\d+) more alerts? not shown`).FindStringSubmatch(p)
		if m == nil {
			t.Fatalf("the prompt (%s, %d NodeDown lines) does not say how many alerts were left out (\"N more alerts not shown\")", kib(len(p)), shown)
		}
		left, _ := strconv.Atoi(m[1])
		if shown+left != floodSize {
			t.Errorf("the prompt shows %d alerts and says %d more are not shown: %d, want %d", shown, left, shown+left, floodSize)
		}
		if n.Reply.Truncated != 0 && n.Reply.Truncated != left {
			t.Errorf("the answer says %d alerts were left out, the prompt %d", n.Reply.Truncated, left)
		}
		if shown == 0 || left == 0 {
			t.Errorf("the prompt shows %d and leaves out %d: want some of each", shown, left)
		}
		for i := floodSize - 9; i <= floodSize; i++ {
			if host := fmt.Sprintf("node-%03d", i); !regexp.MustCompile(`- FIRING NodeDown severity=critical .*\b` + host + `\b`).MatchString(p) {
				t.Errorf("critical alert on %s is not shown: the most severe alerts must be kept", host)
			}
		}
		tl.now("the NodeDown prompt shows %d of %d alerts, says %q", shown, floodSize, m[0])
	})

	t.Run("receiver metrics in Prometheus", func(t *testing.T) {
		turns := len(aw.rec.turns())
		wait.Within(t, stepDeadline, fmt.Sprintf("Prometheus to see %d completed turns", turns), func() bool {
			v, ok, err := prom.scalar(`sum(agent_worker_turns_total{job="agent-worker",agent="oncall",outcome="completed"})`)
			return err == nil && ok && int(v) == turns
		})
		tl.now("prometheus: agent_worker_turns_total{outcome=completed} = %d, as the model saw", turns)
		if n := countPrompts(aw.rec.turns(), "NodeDown"); n != 1 {
			t.Errorf("%d turns saw NodeDown, want 1", n)
		}
		lo := tally(tp.all())
		within := func(q string, lo int, hi func(counts) int) metricCheck { return metricCheck{q, lo, hi} }
		const am = `route="` + receiverRoute + `"`
		checks := []metricCheck{
			within(`sum(agent_worker_alertmanager_notifications_total{agent="oncall",outcome="accepted"})`, lo.accepted, func(c counts) int { return c.accepted }),
			within(`sum(agent_worker_alertmanager_notifications_total{agent="oncall",outcome="duplicate"})`, lo.duplicate, func(c counts) int { return c.duplicate }),
			within(`sum(agent_worker_alertmanager_notifications_total{agent="oncall",outcome="truncated"})`, 1, func(c counts) int { return max(c.truncated, 1) }),
			within(`sum(agent_worker_alertmanager_notifications_total{agent="oncall",outcome="rejected"})`, lo.rejected, func(c counts) int { return c.rejected }),
			within(`sum(agent_worker_wakes_total{agent="oncall",source="alertmanager"})`, lo.wakes, func(c counts) int { return c.wakes }),
			within(`sum(agent_worker_http_requests_total{`+am+`,code="202"})`, lo.accepted, func(c counts) int { return c.accepted }),
			within(`sum(agent_worker_http_requests_total{`+am+`,code="200"})`, lo.duplicate, func(c counts) int { return c.duplicate }),
			within(`sum(agent_worker_http_request_duration_seconds_count{`+am+`})`, lo.total, func(c counts) int { return c.total }),
		}
		var failing []string
		end := time.Now().Add(10 * time.Second)
		for {
			failing = failing[:0]
			for _, c := range checks {
				if msg := c.check(prom, tally(tp.all())); msg != "" {
					failing = append(failing, msg)
				}
			}
			if len(failing) == 0 || time.Now().After(end) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		for _, c := range checks {
			v, ok, err := prom.scalar(c.query)
			tl.now("prometheus: %s = %s", c.query, show(v, ok, err))
		}
		p99, ok, err := prom.scalar(`histogram_quantile(0.99, sum by (le) (rate(agent_worker_http_request_duration_seconds_bucket{` + am + `}[1m])))`)
		tl.now("prometheus: receiver latency p99 over 1m = %s s", show(p99, ok, err))
		for _, f := range failing {
			t.Error(f)
		}
	})

	t.Run("a CI webhook wakes a turn, counted in Prometheus", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, aw.url+"/v1/webhooks/ci", strings.NewReader(`{"repository": "payments", "build": 812, "status": "failed"}`))
		req.Header.Set("Authorization", "Bearer "+aw.tokens["operate"])
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("POST /v1/webhooks/ci: %s", resp.Status)
		}
		tl.now("test → worker: CI webhook, build 812 failed → %s", resp.Status)
		wait.Within(t, stepDeadline, "a turn that saw the rendered webhook", func() bool {
			return countPrompts(aw.rec.turns(), "build 812 of payments: failed") == 1
		})
		wait.Within(t, stepDeadline, "Prometheus to count the webhook", func() bool {
			v, ok, err := prom.scalar(`sum(increase(agent_worker_webhook_notifications_total{webhook="ci",outcome="accepted"}[1m]))`)
			return err == nil && ok && v > 0
		})
		tl.now("prometheus: agent_worker_webhook_notifications_total{webhook=ci,outcome=accepted} increased")
	})

	t.Run("the dashboard's queries answer", func(t *testing.T) {
		checkDashboard(t, prom, tl)
	})
}

// waitTurn waits for a model call after the first `after` whose prompt
// contains want, and returns that prompt.
func waitTurn(t *testing.T, aw *agentWorker, after int, want string) string {
	t.Helper()
	var p string
	wait.Within(t, stepDeadline, fmt.Sprintf("a turn whose prompt contains %q", want), func() bool {
		ps := aw.rec.turns()
		for i := after; i < len(ps); i++ {
			if strings.Contains(ps[i], want) {
				p = ps[i]
				return true
			}
		}
		return false
	})
	return p
}

func countPrompts(ps []string, want string) (n int) {
	for _, p := range ps {
		if strings.Contains(p, want) {
			n++
		}
	}
	return n
}

// counts tallies the tapped and direct notifications by what the worker
// answered.
type counts struct {
	total, accepted, duplicate, rejected int
	// truncated: accepted with alerts left out (the answer says how many).
	truncated int
	// wakes: accepted notifications with a firing alert (each wakes).
	wakes int
}

func tally(ns []notification) counts {
	var c counts
	for _, n := range ns {
		c.total++
		switch n.Outcome {
		case "accepted":
			c.accepted++
			if n.Firing > 0 {
				c.wakes++
			}
			if n.Reply.Truncated > 0 {
				c.truncated++
			}
		case "duplicate":
			c.duplicate++
		case "rejected":
			c.rejected++
		}
	}
	return c
}

// metricCheck wants query's value to be at least min (the counts when
// the step began) and at most max of the counts at the time of the check:
// the counts grow while Alertmanager repeats, and Prometheus lags them by
// a scrape.
type metricCheck struct {
	query string
	min   int
	max   func(counts) int
}

func (c metricCheck) check(p promAPI, now counts) string {
	v, ok, err := p.scalar(c.query)
	switch {
	case err != nil:
		return err.Error()
	case !ok:
		return fmt.Sprintf("%s: no series (not exported, or not scraped)", c.query)
	case v < float64(c.min):
		return fmt.Sprintf("%s = %g, want at least %d", c.query, v, c.min)
	case c.max != nil && v > float64(c.max(now)):
		return fmt.Sprintf("%s = %g, want at most %d", c.query, v, c.max(now))
	}
	return ""
}

func show(v float64, ok bool, err error) string {
	switch {
	case err != nil:
		return "error: " + err.Error()
	case !ok:
		return "no series"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}
