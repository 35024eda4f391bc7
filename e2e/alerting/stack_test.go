package alerting

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// receiverConfig is the Alertmanager configuration docs/alertmanager.md
// shows; the test runs Alertmanager on it.
const receiverConfig = "testdata/alertmanager.yml"

// receiverPath is the receiver's path in receiverConfig's webhook URL.
const receiverPath = "/v1/alertmanager/" + agent

// alertmanagerConfig turns receiverConfig into the configuration the test
// runs, changing only what a test must:
//   - the webhook URL's scheme and host point at the tap (the path,
//     /v1/alertmanager/oncall, stays), and credentials_file at the ingest
//     token the worker was given;
//   - the route's timers are seconds, not minutes: group_wait and
//     group_interval 1s, repeat_interval 2s, so a repeat of an unchanged
//     group comes within the test;
//   - a child route for NodeDown, the 150-alert group, with the same
//     receiver and grouping but a repeat_interval of 1h, so the big group
//     is posted once.
func alertmanagerConfig(t *testing.T, tapURL, tokenFile string) []byte {
	t.Helper()
	raw, err := os.ReadFile(receiverConfig)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf("%s: %v", receiverConfig, err)
	}
	route, _ := c["route"].(map[string]any)
	receivers, _ := c["receivers"].([]any)
	if route == nil || len(receivers) != 1 {
		t.Fatalf("%s: want a route and one receiver", receiverConfig)
	}
	recv, _ := receivers[0].(map[string]any)
	hooks, _ := recv["webhook_configs"].([]any)
	if recv["name"] != route["receiver"] || len(hooks) != 1 {
		t.Fatalf("%s: want the route's receiver to have one webhook_config", receiverConfig)
	}
	hook, _ := hooks[0].(map[string]any)
	u, err := url.Parse(fmt.Sprint(hook["url"]))
	if err != nil || u.Path != receiverPath {
		t.Fatalf("%s: webhook url %v: want the path %s (%v)", receiverConfig, hook["url"], receiverPath, err)
	}
	if hook["send_resolved"] != true {
		t.Fatalf("%s: want send_resolved: true", receiverConfig)
	}
	httpConfig, _ := hook["http_config"].(map[string]any)
	auth, _ := httpConfig["authorization"].(map[string]any)
	if auth == nil || auth["credentials_file"] == nil {
		t.Fatalf("%s: want http_config.authorization.credentials_file", receiverConfig)
	}

	hook["url"] = tapURL + u.Path
	auth["credentials_file"] = tokenFile
	route["group_wait"], route["group_interval"], route["repeat_interval"] = "1s", "1s", "2s"
	route["routes"] = []any{map[string]any{
		"matchers":        []any{`alertname="NodeDown"`},
		"receiver":        route["receiver"],
		"group_by":        route["group_by"],
		"repeat_interval": "1h",
	}}
	out, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// prometheusConfig scrapes the exporter and the worker (with the read
// token: /metrics is not open in the test's worker) every second,
// evaluates the rules every second and sends alerts to the Alertmanager.
const prometheusConfig = `global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: [%q]
alerting:
  alertmanagers:
    - static_configs:
        - targets: [%q]
scrape_configs:
  - job_name: e2e-exporter
    static_configs:
      - targets: [%q]
  - job_name: agent-worker
    authorization:
      credentials_file: %q
    static_configs:
      - targets: [%q]
`

// alertRules fire at once (for: 0s) on the exporter's series: DiskFull on
// one series, NodeDown on the 150 of the flood. Every alert carries a team
// label and a summary.
const alertRules = `groups:
  - name: e2e
    interval: 1s
    rules:
      - alert: DiskFull
        expr: test_alert{name="disk_full"} > 0
        for: 0s
        labels:
          team: storage
        annotations:
          summary: "/var on {{ $labels.host }} is full"
      - alert: NodeDown
        expr: test_alert{name="node_down"} > 0
        for: 0s
        labels:
          team: fleet
        annotations:
          summary: "{{ $labels.host }} stopped reporting: kubelet heartbeats missing for 5 minutes, its pods are being rescheduled elsewhere"
`

// promAPI queries Prometheus' HTTP API.
type promAPI struct{ base string }

type promSample struct {
	Metric map[string]string
	Value  float64
}

// query runs an instant query and returns its vector.
func (p promAPI) query(q string) ([]promSample, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/api/v1/query?query="+url.QueryEscape(q), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("query %s: %s: %w", q, resp.Status, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", q, r.Error)
	}
	if r.Data.ResultType != "vector" {
		return nil, fmt.Errorf("query %s: a %s, want a vector", q, r.Data.ResultType)
	}
	var out []promSample
	for _, s := range r.Data.Result {
		v, err := strconv.ParseFloat(fmt.Sprint(s.Value[1]), 64)
		if err != nil {
			return nil, fmt.Errorf("query %s: value %v: %w", q, s.Value[1], err)
		}
		out = append(out, promSample{Metric: s.Metric, Value: v})
	}
	return out, nil
}

// scalar runs q, which must return at most one sample: its value, and
// whether there was one.
func (p promAPI) scalar(q string) (float64, bool, error) {
	v, err := p.query(q)
	if err != nil {
		return 0, false, err
	}
	switch len(v) {
	case 0:
		return 0, false, nil
	case 1:
		return v[0].Value, true, nil
	}
	return 0, false, fmt.Errorf("query %s: %d samples, want at most one", q, len(v))
}

// activeAlertmanagers is how many Alertmanagers Prometheus sends to.
func (p promAPI) activeAlertmanagers() (int, error) {
	resp, err := http.Get(p.base + "/api/v1/alertmanagers")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Active []struct {
				URL string `json:"url"`
			} `json:"activeAlertmanagers"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, err
	}
	return len(r.Data.Active), nil
}

// startAlertmanager runs prometheus-alertmanager on config, on a free
// loopback port, without clustering (no gossip port), and waits until it
// is ready.
func startAlertmanager(t *testing.T, bin, dir string, config []byte) (addr string) {
	t.Helper()
	path := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(path, config, 0o600); err != nil {
		t.Fatal(err)
	}
	addr = freeAddr(t)
	p := startProc(t, dir, "alertmanager", bin,
		"--config.file="+path,
		"--storage.path="+filepath.Join(dir, "alertmanager-data"),
		"--web.listen-address="+addr,
		"--cluster.listen-address=",
		"--log.level=info",
	)
	p.waitReady(t, "http://"+addr+"/-/ready", 20*time.Second)
	return addr
}

// startPrometheus runs prometheus on a free loopback port and waits until
// it is ready.
func startPrometheus(t *testing.T, bin, dir, alertmanager, exporter, worker, readTokenFile string) promAPI {
	t.Helper()
	rules := filepath.Join(dir, "rules.yml")
	if err := os.WriteFile(rules, []byte(alertRules), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "prometheus.yml")
	cfg := fmt.Sprintf(prometheusConfig, rules, alertmanager, exporter, readTokenFile, worker)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	p := startProc(t, dir, "prometheus", bin,
		"--config.file="+path,
		"--storage.tsdb.path="+filepath.Join(dir, "prometheus-data"),
		"--web.listen-address="+addr,
	)
	p.waitReady(t, "http://"+addr+"/-/ready", 30*time.Second)
	return promAPI{base: "http://" + addr}
}
