package metrics_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/agent-worker/agent-worker/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

const dashboardPath = "../deploy/grafana/agent-worker.json"

type dashboard struct {
	SchemaVersion int     `json:"schemaVersion"`
	Title         string  `json:"title"`
	UID           string  `json:"uid"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Query      any    `json:"query"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID      int     `json:"id"`
	Type    string  `json:"type"`
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"` // a row's collapsed panels
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatalf("read dashboard: %v", err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("parse %s: %v", dashboardPath, err)
	}
	return d
}

// exprs returns every target expression of the dashboard's panels, rows'
// panels included, keyed by "panel title #n".
func exprs(ps []panel) map[string]string {
	out := map[string]string{}
	for _, p := range ps {
		for i, tg := range p.Targets {
			if tg.Expr != "" {
				out[fmt.Sprintf("%s #%d", p.Title, i)] = tg.Expr
			}
		}
		for k, v := range exprs(p.Panels) {
			out[k] = v
		}
	}
	return out
}

func countPanels(ps []panel) (n int) {
	for _, p := range ps {
		if p.Type != "row" {
			n++
		}
		n += countPanels(p.Panels)
	}
	return n
}

// registered returns the metric names New registers: the families a
// Gather shows plus, for families with no series yet, the names in the
// registry's Describe output.
func registered(t *testing.T) map[string]bool {
	t.Helper()
	m := metrics.New(testAgents(), &source{})
	names := map[string]bool{}
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	ch := make(chan *prometheus.Desc)
	go func() {
		m.Registry().Describe(ch)
		close(ch)
	}()
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range ch {
		if s := fq.FindStringSubmatch(d.String()); s != nil {
			names[s[1]] = true
		}
	}
	return names
}

var metricRef = regexp.MustCompile(`agent_worker_[a-z_]+`)

func TestDashboardReferencesOnlyRegisteredMetrics(t *testing.T) {
	t.Parallel()
	d := loadDashboard(t)
	if countPanels(d.Panels) == 0 {
		t.Fatal("dashboard has no panels")
	}
	if d.SchemaVersion < 36 || d.UID == "" || d.Title == "" {
		t.Errorf("dashboard schemaVersion %d, uid %q, title %q: want a current schema, a uid and a title", d.SchemaVersion, d.UID, d.Title)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
		if v.Name == "agent" && !strings.Contains(v.Definition, "label_values(agent_worker_agent_state, agent)") {
			t.Errorf("agent variable is %q, want label_values(agent_worker_agent_state, agent)", v.Definition)
		}
	}
	if vars["datasource"] != "datasource" || vars["agent"] != "query" {
		t.Errorf("template variables %v: want datasource (datasource) and agent (query)", vars)
	}

	names := registered(t)
	used := map[string]bool{}
	all := exprs(d.Panels)
	if len(all) == 0 {
		t.Fatal("no panel has a target expression")
	}
	for where, expr := range all {
		for _, ref := range metricRef.FindAllString(expr, -1) {
			name := ref
			if !names[name] {
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if base, ok := strings.CutSuffix(ref, suffix); ok && names[base] {
						name = base
					}
				}
			}
			if !names[name] {
				t.Errorf("panel %s uses %s, which New does not register: %s", where, ref, expr)
			}
			used[name] = true
		}
	}
	// And the other way round: a metric nobody can see is drift too.
	var unused []string
	for n := range names {
		if strings.HasPrefix(n, "agent_worker_") && !used[n] {
			unused = append(unused, n)
		}
	}
	sort.Strings(unused)
	if len(unused) > 0 {
		t.Errorf("metrics on no dashboard panel: %v", unused)
	}
	for _, n := range contract {
		if !names[n] {
			t.Errorf("contract metric %s is not registered", n)
		}
	}
}

// The dashboard's queries parse as PromQL: promtool checks them as
// recording rules, with Grafana's variables replaced by values.
func TestDashboardQueriesParse(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found on PATH (%v): install the Debian package `prometheus` (apt-get install prometheus); CI installs it", err)
	}
	vars := strings.NewReplacer("$__rate_interval", "5m", "$__range", "1d", "$agent", ".*")
	var rules strings.Builder
	rules.WriteString("groups:\n- name: dashboard\n  rules:\n")
	keys := make([]string, 0)
	all := exprs(loadDashboard(t).Panels)
	for k := range all {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		q, _ := json.Marshal(vars.Replace(all[k])) // a JSON string is a YAML string
		fmt.Fprintf(&rules, "  - record: dashboard:q%d\n    expr: %s\n", i, q)
	}
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s\n%s", err, out, rules.String())
	}
}
