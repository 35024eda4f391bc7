package alerting

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// dashboardPath is the Grafana dashboard over the worker's metrics.
const dashboardPath = "../../deploy/grafana/agent-worker.json"

// dashboardVars are the values the dashboard's variables take here: every
// agent and instance, and short ranges for a test that lasts seconds.
var dashboardVars = strings.NewReplacer("$__rate_interval", "1m", "$__range", "1h", "$agent", ".*", "$instance", ".*")

// mustAnswer are the panels whose every query must return series once the
// test has driven the receiver: the API, the receiver and the process.
var mustAnswer = []string{
	"API requests by route and code",
	"API latency p50 / p99 by route",
	"Alertmanager and webhook notifications by outcome",
	"Model error ratio",
	"Resident memory",
	"CPU",
	"Restarts in the last hour",
}

type dashboardPanel struct {
	Title   string           `json:"title"`
	Panels  []dashboardPanel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// checkDashboard runs every query of the dashboard against Prometheus,
// which scrapes a worker that has served the receiver: each must run,
// and the panels in mustAnswer must show data.
func checkDashboard(t *testing.T, prom promAPI, tl *timeline) {
	t.Helper()
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []dashboardPanel `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	must := map[string]bool{}
	for _, title := range mustAnswer {
		must[title] = true
	}
	var walk func([]dashboardPanel)
	queries, empty := 0, 0
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			answered := false
			var silent []string
			for i, tg := range p.Targets {
				q := dashboardVars.Replace(tg.Expr)
				res, err := prom.query(q)
				queries++
				switch {
				case err != nil:
					t.Errorf("panel %q query %d: %v", p.Title, i, err)
				case len(res) == 0:
					empty++
					silent = append(silent, q)
				default:
					answered = true
				}
			}
			// A panel must show data: one of its queries answers (a
			// second one may count what has not happened, such as
			// failed logins).
			if must[p.Title] && !answered && len(p.Targets) > 0 {
				t.Errorf("panel %q shows nothing: %s", p.Title, strings.Join(silent, "; "))
			}
			delete(must, p.Title)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for title := range must {
		t.Errorf("the dashboard has no panel %q", title)
	}
	instances, err := prom.query(`group by (instance) (agent_worker_dependency_up)`)
	if err != nil || len(instances) != 1 {
		t.Errorf("the instance variable's metric, agent_worker_dependency_up, gives instances %v (%v), want the worker", instances, err)
	}
	tl.now("prometheus: the dashboard's %d queries run; %d return nothing here (events that did not happen)", queries, empty)
}
