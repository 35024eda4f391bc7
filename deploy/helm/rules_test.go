package helm_test

// The alert rules: files/rules.yaml in the chart is the one source. It is
// checked and unit-tested with promtool as a plain Prometheus rules file
// (deploy/prometheus/rules_test.yaml), and rendered by the chart into its
// PrometheusRule, which must hold the same rules, scoped to the release.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"

	"github.com/agent-worker/agent-worker/metrics"
)

const (
	rulesFile     = chartDir + "/files/rules.yaml"
	rulesTestFile = "../prometheus/rules_test.yaml"
	runbookFile   = "../../docs/alerts.md"
	// The runbook_url base in rules.yaml (prometheusRule.runbookBaseUrl's
	// default).
	runbookBase = "https://github.com/agent-worker/agent-worker/blob/main/docs/alerts.md"
	// Every selector in rules.yaml holds it; the chart replaces it.
	jobMatcher = `job="agent-worker"`
)

type ruleFile struct {
	Groups []ruleGroup `yaml:"groups" json:"groups"`
}

type ruleGroup struct {
	Name  string `yaml:"name" json:"name"`
	Rules []rule `yaml:"rules" json:"rules"`
}

type rule struct {
	Alert       string            `yaml:"alert" json:"alert"`
	Record      string            `yaml:"record,omitempty" json:"record,omitempty"`
	Expr        string            `yaml:"expr" json:"expr"`
	For         string            `yaml:"for,omitempty" json:"for,omitempty"`
	Labels      map[string]string `yaml:"labels" json:"labels"`
	Annotations map[string]string `yaml:"annotations" json:"annotations"`
}

func loadRules(t *testing.T) ruleFile {
	t.Helper()
	raw, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	return f
}

func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		// Never skip: alerts nobody tests are alerts that never fire.
		t.Fatalf("promtool not found on PATH (%v): install the Debian package `prometheus` (apt-get install prometheus, or make deps); CI installs it", err)
	}
	return p
}

// TestAlertRulesPromtool: promtool accepts the rules and their unit tests
// pass.
func TestAlertRulesPromtool(t *testing.T) {
	t.Parallel()
	pt := promtool(t)
	for _, args := range [][]string{
		{"check", "rules", rulesFile},
		{"test", "rules", rulesTestFile},
	} {
		out, err := exec.Command(pt, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestAlertRulesTested: every alert has a unit test where it fires and one
// where it does not, and nothing is tested that does not exist.
func TestAlertRulesTested(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	var tf struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			Name  string `yaml:"name"`
			Cases []struct {
				Alert     string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(raw, &tf); err != nil {
		t.Fatal(err)
	}
	if want := "../helm/agent-worker/files/rules.yaml"; !slices.Equal(tf.RuleFiles, []string{want}) {
		t.Errorf("%s tests rule_files %v, want only the chart's %s", rulesTestFile, tf.RuleFiles, want)
	}
	firing, quiet := map[string]int{}, map[string]int{}
	for _, tc := range tf.Tests {
		for _, c := range tc.Cases {
			if len(c.ExpAlerts) > 0 {
				firing[c.Alert]++
			} else {
				quiet[c.Alert]++
			}
		}
	}
	alerts := map[string]bool{}
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = true
			if firing[r.Alert] == 0 || quiet[r.Alert] == 0 {
				t.Errorf("alert %s: %d firing and %d quiet unit test cases, want at least one of each", r.Alert, firing[r.Alert], quiet[r.Alert])
			}
		}
	}
	for a := range firing {
		if !alerts[a] {
			t.Errorf("%s tests alert %s, which rules.yaml does not have", rulesTestFile, a)
		}
	}
	for a := range quiet {
		if !alerts[a] {
			t.Errorf("%s tests alert %s, which rules.yaml does not have", rulesTestFile, a)
		}
	}
}

var (
	// A metric name followed by its selector's braces.
	selectorRef = regexp.MustCompile(`\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}`)
	metricName  = regexp.MustCompile(`\b(agent_worker_[a-z_]+|up)\b`)
	headingRef  = regexp.MustCompile(`(?m)^## (\S+)\s*$`)
)

// registeredMetrics: the names metrics.New registers (Describe).
func registeredMetrics() map[string]bool {
	m := metrics.New([]metrics.AgentInfo{{Name: "a", Tools: []string{"t"}, Schedules: []string{"s"}}}, nil)
	ch := make(chan *prometheus.Desc)
	go func() {
		m.Registry().Describe(ch)
		close(ch)
	}()
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := map[string]bool{}
	for d := range ch {
		if s := fq.FindStringSubmatch(d.String()); s != nil {
			names[s[1]] = true
		}
	}
	return names
}

// TestAlertRulesContract: every alert is named, labelled, annotated and
// linked to its runbook section; it reads only metrics the worker
// exports, and every selector holds job="agent-worker" so the chart can
// scope it.
func TestAlertRulesContract(t *testing.T) {
	t.Parallel()
	runbook, err := os.ReadFile(runbookFile)
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, m := range headingRef.FindAllStringSubmatch(string(runbook), -1) {
		sections[m[1]] = true
	}
	registered := registeredMetrics()
	if !registered["agent_worker_agent_state"] {
		t.Fatalf("metrics.New registers no agent_worker_agent_state: %v", registered)
	}
	seen := map[string]bool{}
	for _, g := range loadRules(t).Groups {
		if !strings.HasPrefix(g.Name, "agent-worker.") {
			t.Errorf("group %q: want an agent-worker. prefix", g.Name)
		}
		for _, r := range g.Rules {
			name := r.Alert
			if name == "" || r.Record != "" {
				t.Errorf("group %s: a rule that is not an alert: %+v", g.Name, r)
				continue
			}
			if seen[name] || !strings.HasPrefix(name, "AgentWorker") {
				t.Errorf("alert %q: duplicate, or not AgentWorker*", name)
			}
			seen[name] = true
			switch r.Labels["severity"] {
			case "critical", "warning", "info":
			default:
				t.Errorf("%s: severity %q, want critical, warning or info", name, r.Labels["severity"])
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("%s: no %s annotation", name, a)
				}
			}
			anchor := strings.ToLower(name)
			if want := runbookBase + "#" + anchor; r.Annotations["runbook_url"] != want {
				t.Errorf("%s: runbook_url %q, want %q", name, r.Annotations["runbook_url"], want)
			}
			if !sections[name] {
				t.Errorf("%s: %s has no section \"## %s\" (anchor #%s)", name, runbookFile, name, anchor)
			}
			for _, ref := range metricName.FindAllString(r.Expr, -1) {
				if ref != "up" && !registered[ref] {
					t.Errorf("%s uses %s, which the worker does not export", name, ref)
				}
			}
			sels := selectorRef.FindAllStringSubmatch(r.Expr, -1)
			if len(sels) == 0 {
				t.Errorf("%s: no selector in %q", name, r.Expr)
			}
			for _, s := range sels {
				if !strings.Contains(s[2], jobMatcher) {
					t.Errorf("%s: selector %s{%s} lacks %s: the chart could not scope it to its release", name, s[1], s[2], jobMatcher)
				}
			}
		}
	}
	for s := range sections {
		if strings.HasPrefix(s, "AgentWorker") && !seen[s] {
			t.Errorf("%s has a section for %s, which rules.yaml does not have", runbookFile, s)
		}
	}
}

// renderedRules renders the chart's PrometheusRule with the monitoring
// value set and more args.
func renderedRules(t *testing.T, args ...string) *monitoringv1.PrometheusRule {
	t.Helper()
	m := decodeAll(t, templateOut(t, append([]string{"--values", ciValues("monitoring")}, args...)...))
	return only[*monitoringv1.PrometheusRule](t, m)
}

// asRuleFile converts a PrometheusRule's groups to the rules file's form.
func asRuleFile(t *testing.T, pr *monitoringv1.PrometheusRule) ruleFile {
	t.Helper()
	raw, err := json.Marshal(pr.Spec)
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestPrometheusRule: the chart's PrometheusRule is rules.yaml, scoped to
// the release, with the configured runbook base, labels and exclusions;
// and promtool accepts what it renders.
func TestPrometheusRule(t *testing.T) {
	t.Parallel()
	want := loadRules(t)

	// With the selector rules.yaml has and no extra labels, the render is
	// rules.yaml itself.
	same := renderedRules(t, "--values", writeValues(t, `
prometheusRule:
  selector: 'job="agent-worker"'
  additionalRuleLabels: null
`))
	if got := asRuleFile(t, same); !reflect.DeepEqual(got, want) {
		gj, _ := json.MarshalIndent(got, "", "  ")
		wj, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("the PrometheusRule is not rules.yaml:\n--- rendered:\n%s\n--- rules.yaml:\n%s", gj, wj)
	}

	// Defaults: scoped to the release's job and namespace.
	pr := renderedRules(t)
	if pr.Labels["release"] != "kube-prometheus-stack" {
		t.Errorf("prometheusRule.additionalLabels missing: %v", pr.Labels)
	}
	got := asRuleFile(t, pr)
	scope := `job="aw-agent-worker", namespace="agents"`
	var n int
	for _, g := range got.Groups {
		for _, r := range g.Rules {
			n++
			if strings.Contains(r.Expr, jobMatcher) {
				t.Errorf("%s: %s left in %q", r.Alert, jobMatcher, r.Expr)
			}
			for _, s := range selectorRef.FindAllStringSubmatch(r.Expr, -1) {
				if !strings.Contains(s[2], scope) {
					t.Errorf("%s: selector %s{%s} is not scoped to the release (%s)", r.Alert, s[1], s[2], scope)
				}
			}
			if r.Labels["team"] != "platform" || r.Labels["severity"] == "" {
				t.Errorf("%s: labels %v, want severity and additionalRuleLabels' team", r.Alert, r.Labels)
			}
		}
	}
	if n != countRules(want) {
		t.Errorf("the PrometheusRule has %d rules, rules.yaml %d", n, countRules(want))
	}
	checkRenderedWithPromtool(t, got)

	// Runbook base, disabled alerts.
	pr = renderedRules(t, "--set", "prometheusRule.runbookBaseUrl=https://wiki.example.com/agent-worker/",
		"--set", "prometheusRule.disabledAlerts={AgentWorkerAbsent,AgentWorkerScheduleMissed}")
	got = asRuleFile(t, pr)
	n = 0
	for _, g := range got.Groups {
		if len(g.Rules) == 0 {
			t.Errorf("group %s is empty: drop it", g.Name)
		}
		for _, r := range g.Rules {
			n++
			if r.Alert == "AgentWorkerAbsent" || r.Alert == "AgentWorkerScheduleMissed" {
				t.Errorf("disabled alert %s is rendered", r.Alert)
			}
			if want := "https://wiki.example.com/agent-worker#" + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
			}
		}
	}
	if n != countRules(want)-2 {
		t.Errorf("with two alerts disabled: %d rules, want %d", n, countRules(want)-2)
	}
}

func countRules(f ruleFile) (n int) {
	for _, g := range f.Groups {
		n += len(g.Rules)
	}
	return n
}

// checkRenderedWithPromtool: the rendered (rewritten) rules still parse.
func checkRenderedWithPromtool(t *testing.T, f ruleFile) {
	t.Helper()
	pt := promtool(t)
	raw, err := yaml.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "rendered-rules.yaml")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(pt, "check", "rules", path).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules on the rendered PrometheusRule: %v\n%s\n%s", err, out, raw)
	} else if !strings.Contains(string(out), fmt.Sprintf("SUCCESS: %d rules found", countRules(f))) {
		t.Errorf("promtool check rules on the rendered PrometheusRule:\n%s", out)
	}
}
