// Package helm_test renders the Helm chart in agent-worker/ without a
// Kubernetes cluster and checks its structure, and that the config it ships
// is one the worker accepts (config.Load, the worker's own loader).
package helm_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agent-worker/agent-worker/config"
)

const (
	chartDir   = "agent-worker"
	helmModule = "helm.sh/helm/v3/cmd/helm@v3.22.0"
	configPath = "/etc/agent-worker/config.yaml"
	tokenEnv   = "AGENT_WORKER_TOKEN"
)

// overrideValues turns on everything optional and points the worker at an
// external NATS and a Redis store.
const overrideValues = `
persistence:
  enabled: true
  size: 5Gi
  storageClass: fast
serviceMonitor:
  enabled: true
  additionalLabels: {release: kube-prometheus-stack}
apiToken:
  existingSecret: ops-token
  key: bearer
secretEnv:
  - {name: OPENAI_API_KEY, secretName: llm-keys, key: openai}
service:
  exposeNats: true   # ignored: NATS is external
terminationGracePeriodSeconds: 100
config:
  shutdown_grace: 1m30s
  nats:
    url: nats://nats.messaging.svc:4222
  store:
    url: redis://redis-master.data.svc:6379/0
  models:
    main: {provider: openai, model: gpt-4.1-mini, api_key_env: OPENAI_API_KEY}
  agents:
    - name: oncall
      model: main
      instruction: Triage the alerts.
      tools: [schedule_next_turn, report_done]
      subscribe: [{subject: "alerts.prod.>", mode: inbox}]
      budgets: {session_usd: 10}
      schedules:
        - {name: morning, cron: "0 8 * * MON-FRI", timezone: Europe/Berlin, prompt: Report.}
`

// binDir holds the helm binary for this test process.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "agent-worker-helm-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// helmBin returns the command that runs helm: the helm on PATH, else helm
// built from the module proxy. `go run` keeps the built executable in
// GOCACHE, so only the first run on a machine pays for the build (a minute
// or two); `-exec cp` copies it out, so each later helm call is a plain exec.
var helmBin = sync.OnceValues(func() ([]string, error) {
	if p, err := exec.LookPath("helm"); err == nil {
		return []string{p}, nil
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("no helm on PATH and no go to build it: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := exec.LookPath("cp"); err != nil {
		// No cp: run every helm call through go run (about a second each).
		cmd := []string{gobin, "run", helmModule}
		if out, err := runCmd(ctx, cmd, "version", "--short"); err != nil {
			return nil, fmt.Errorf("building helm with go run %s: %w\n%s", helmModule, err, out)
		}
		return cmd, nil
	}
	bin := filepath.Join(binDir, "helm")
	if out, err := runCmd(ctx, []string{gobin, "run", "-exec", "cp", helmModule}, bin); err != nil {
		return nil, fmt.Errorf("building helm with go run %s: %w\n%s", helmModule, err, out)
	}
	return []string{bin}, nil
})

func runCmd(ctx context.Context, cmd []string, args ...string) (string, error) {
	c := exec.CommandContext(ctx, cmd[0], append(slices.Clip(cmd[1:]), args...)...)
	// pkg@version builds ignore the main module; keep the repo's GOFLAGS
	// (e.g. -mod=vendor) and any go.work out of it.
	c.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-buildvcs=false",
		// helm reads and writes nothing of the user's.
		"HELM_CACHE_HOME="+filepath.Join(binDir, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(binDir, "config"),
		"HELM_DATA_HOME="+filepath.Join(binDir, "data"))
	var b bytes.Buffer
	c.Stdout, c.Stderr = &b, &b
	err := c.Run()
	return b.String(), err
}

// helm runs helm with args and returns its combined output.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd, err := helmBin()
	if err != nil {
		t.Fatal(err) // never skip: a chart nobody renders is a chart nobody checks
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if len(args) > 0 && (args[0] == "template" || args[0] == "lint") && !slices.Contains(args, "--kube-version") {
		args = append([]string{args[0], "--kube-version", kubeVersion}, args[1:]...)
	}
	return runCmd(ctx, cmd, args...)
}

// kubeVersion is the Kubernetes version renders and lint assume unless a
// test names its own: the chart's floor (Chart.yaml kubeVersion), where
// helm's own default is older than the chart supports.
const kubeVersion = "1.27.0"

func writeValues(t *testing.T, text string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// object is one rendered manifest.
type object map[string]any

func (o object) kind() string { return str(o, "kind") }
func (o object) name() string { return str(o, "metadata", "name") }

// get walks maps by key and lists by int index.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := asMap(v)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func asMap(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case object:
		return m, true
	case map[string]any:
		return m, true
	}
	return nil, false
}

func str(v any, path ...any) string {
	s, _ := get(v, path...).(string)
	return s
}

func list(v any, path ...any) []any {
	l, _ := get(v, path...).([]any)
	return l
}

// render runs helm template and parses every document.
func render(t *testing.T, args ...string) []object {
	t.Helper()
	out, err := helm(t, append([]string{"template", "aw", chartDir, "--namespace", "agents"}, args...)...)
	if err != nil {
		t.Fatalf("helm template %v: %v\n%s", args, err, out)
	}
	var objs []object
	dec := yaml.NewDecoder(strings.NewReader(out))
	for {
		var o map[string]any // not object: yaml.v3 would make nested maps objects too
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("helm template output is not YAML: %v\n%s", err, out)
		}
		if o != nil {
			objs = append(objs, object(o))
		}
	}
	return objs
}

func ofKind(objs []object, kind string) []object {
	var out []object
	for _, o := range objs {
		if o.kind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func one(t *testing.T, objs []object, kind string) object {
	t.Helper()
	got := ofKind(objs, kind)
	if len(got) != 1 {
		t.Fatalf("want one %s, got %d", kind, len(got))
	}
	return got[0]
}

func TestLint(t *testing.T) {
	for _, vs := range valueSets(t) {
		out, err := helm(t, append([]string{"lint", "--strict", chartDir}, vs.args...)...)
		if err != nil || !strings.Contains(out, "0 chart(s) failed") {
			t.Errorf("helm lint (%s): %v\n%s", vs.name, err, out)
		}
	}
	// The defaults alone: lint reports the missing apiToken as [INFO] and
	// passes; rendering them fails (TestTemplateRefuses).
	out, err := helm(t, "lint", "--strict", chartDir)
	if err != nil || !strings.Contains(out, "0 chart(s) failed") {
		t.Errorf("helm lint (defaults): %v\n%s", err, out)
	}
}

// checked is what a render must satisfy whatever the values.
type checked struct {
	objs      []object
	container any
	cfg       *config.Config
}

func checkCommon(t *testing.T, objs []object) checked {
	dep := one(t, objs, "Deployment")
	cm := one(t, objs, "ConfigMap")
	pod := get(dep, "spec", "template", "spec")
	containers := list(pod, "containers")
	if len(containers) != 1 {
		t.Fatalf("want one container, got %d", len(containers))
	}
	c := containers[0]

	var args []string
	for _, a := range list(c, "args") {
		args = append(args, fmt.Sprint(a))
	}
	if want := []string{"run", "--config", configPath}; !slices.Equal(args, want) {
		t.Errorf("container args = %q, want %q", args, want)
	}

	// The ConfigMap is mounted where --config points.
	var configVolume string
	for _, v := range list(pod, "volumes") {
		if str(v, "configMap", "name") == cm.name() {
			configVolume = str(v, "name")
		}
	}
	if configVolume == "" {
		t.Errorf("no volume of ConfigMap %s", cm.name())
	}
	mounts := map[string]string{} // mountPath -> volume
	for _, m := range list(c, "volumeMounts") {
		mounts[str(m, "mountPath")] = str(m, "name")
	}
	if mounts[filepath.Dir(configPath)] != configVolume || configVolume == "" {
		t.Errorf("ConfigMap volume %q not mounted at %s: mounts %v", configVolume, filepath.Dir(configPath), mounts)
	}
	if mounts["/data"] == "" {
		t.Errorf("nothing mounted at /data: mounts %v", mounts)
	}
	if get(dep, "spec", "template", "metadata", "annotations", "checksum/config") == nil {
		t.Error("no checksum/config annotation: a config change would not roll the pod")
	}

	// The config is one the worker loads.
	text := str(cm, "data", "config.yaml")
	f := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(f)
	if err != nil {
		t.Fatalf("the chart's config.yaml is rejected by config.Load:\n%v\n--- config.yaml:\n%s", err, text)
	}

	// Every environment variable the config names is provided: the tokens
	// (the worker will not serve beyond loopback without one) and the
	// providers' API keys.
	env := map[string]any{}
	for _, e := range list(c, "env") {
		env[str(e, "name")] = e
	}
	tok, ok := env[tokenEnv]
	if !ok || str(tok, "valueFrom", "secretKeyRef", "name") == "" || str(tok, "valueFrom", "secretKeyRef", "key") == "" {
		t.Errorf("%s is not set from a Secret: %v", tokenEnv, tok)
	}
	if len(cfg.API.Tokens) == 0 {
		t.Error("config has no api.tokens: the worker refuses to serve beyond loopback without one")
	}
	for _, tk := range cfg.API.Tokens {
		if _, ok := env[tk.ValueEnv]; tk.ValueEnv != "" && !ok {
			t.Errorf("api token %s reads %s, which the container does not set", tk.Name, tk.ValueEnv)
		}
	}
	for name, m := range cfg.Models {
		if _, ok := env[m.APIKeyEnv]; m.APIKeyEnv != "" && !ok {
			t.Errorf("model %s reads %s, which the container does not set", name, m.APIKeyEnv)
		}
	}

	// The API listens where the probes and the Service reach it.
	host, port, err := net.SplitHostPort(cfg.API.Listen)
	if err != nil {
		t.Fatalf("api.listen %q: %v", cfg.API.Listen, err)
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		t.Errorf("api.listen %q is loopback: unreachable for probes and the Service", cfg.API.Listen)
	}
	var httpPort string
	for _, p := range list(c, "ports") {
		if str(p, "name") == "http" {
			httpPort = fmt.Sprint(get(p, "containerPort"))
		}
	}
	if httpPort != port {
		t.Errorf("container port http = %q, api.listen port = %q", httpPort, port)
	}
	for probe, path := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz"} {
		if got, p := str(c, probe, "httpGet", "path"), fmt.Sprint(get(c, probe, "httpGet", "port")); got != path || p != "http" {
			t.Errorf("%s: path %q port %q, want %s on http", probe, got, p, path)
		}
		if !slices.Contains(cfg.API.OpenPaths, path) {
			t.Errorf("%s: %s is not in api.open_paths %v: the kubelet has no token", probe, path, cfg.API.OpenPaths)
		}
	}

	// Shutdown: the kubelet waits longer than the worker's grace.
	grace, ok := get(pod, "terminationGracePeriodSeconds").(int)
	if !ok || time.Duration(grace)*time.Second <= cfg.ShutdownGrace.D() {
		t.Errorf("terminationGracePeriodSeconds %v is not above shutdown_grace %v", get(pod, "terminationGracePeriodSeconds"), cfg.ShutdownGrace.D())
	}

	// A read-only root: data_dir is on the /data volume.
	if get(c, "securityContext", "readOnlyRootFilesystem") != true {
		t.Error("readOnlyRootFilesystem is not set")
	}
	if get(pod, "securityContext", "runAsNonRoot") != true {
		t.Error("runAsNonRoot is not set")
	}
	if d := filepath.Clean(cfg.DataDir); d != "/data" && !strings.HasPrefix(d, "/data/") {
		t.Errorf("data_dir %q is not on the /data volume", cfg.DataDir)
	}

	// The Service targets the http port.
	svc := one(t, objs, "Service")
	if p := list(svc, "spec", "ports"); len(p) == 0 || str(p[0], "targetPort") != "http" {
		t.Errorf("Service ports %v: want http first", p)
	}
	return checked{objs: objs, container: c, cfg: cfg}
}

func TestTemplateDefaults(t *testing.T) {
	objs := render(t, "--values", ciValues("default"))
	ch := checkCommon(t, objs)

	if ch.cfg.NATS.URL != "" || !strings.HasPrefix(ch.cfg.Store.URL, "nats://") {
		t.Errorf("default: nats.url %q store.url %q, want the embedded server and nats://", ch.cfg.NATS.URL, ch.cfg.Store.URL)
	}
	if len(ch.cfg.Agents) != 1 || ch.cfg.Models[ch.cfg.Agents[0].Model].Behaviour != "demo" {
		t.Errorf("default: want one agent on the demo behaviour, got %+v", ch.cfg.Agents)
	}
	if n := ofKind(objs, "ServiceMonitor"); len(n) != 0 {
		t.Error("ServiceMonitor rendered while disabled")
	}
	if n := ofKind(objs, "PersistentVolumeClaim"); len(n) != 0 {
		t.Error("PVC rendered while persistence is disabled")
	}
	secret := one(t, objs, "Secret")
	tok := get(ch.container, "env", 0, "valueFrom", "secretKeyRef")
	if str(tok, "name") != secret.name() || str(get(secret, "data"), str(tok, "key")) == "" {
		t.Errorf("%s refers to %v; the chart's Secret %s has %v", tokenEnv, tok, secret.name(), get(secret, "data"))
	}
	dep := one(t, objs, "Deployment")
	if s := str(dep, "spec", "strategy", "type"); s != "Recreate" {
		t.Errorf("strategy %q with the embedded NATS server, want Recreate", s)
	}
	var emptyDir bool
	for _, v := range list(dep, "spec", "template", "spec", "volumes") {
		if str(v, "name") == "data" {
			_, emptyDir = asMap(get(v, "emptyDir"))
		}
	}
	if !emptyDir {
		t.Error("data volume is not an emptyDir without persistence")
	}
}

func TestTemplateOverride(t *testing.T) {
	objs := render(t, "--values", writeValues(t, overrideValues))
	ch := checkCommon(t, objs)

	if ch.cfg.NATS.URL != "nats://nats.messaging.svc:4222" || !strings.HasPrefix(ch.cfg.Store.URL, "redis://") {
		t.Errorf("override: nats.url %q store.url %q", ch.cfg.NATS.URL, ch.cfg.Store.URL)
	}
	if s := ofKind(objs, "Secret"); len(s) != 0 {
		t.Errorf("a Secret is rendered with apiToken.existingSecret: %v", s[0].name())
	}
	tok := get(ch.container, "env", 0)
	if str(tok, "name") != tokenEnv || str(tok, "valueFrom", "secretKeyRef", "name") != "ops-token" || str(tok, "valueFrom", "secretKeyRef", "key") != "bearer" {
		t.Errorf("%s does not come from the existing Secret: %v", tokenEnv, tok)
	}

	sm := one(t, objs, "ServiceMonitor")
	ep := get(sm, "spec", "endpoints", 0)
	if str(ep, "port") != "http" || str(ep, "path") != "/metrics" {
		t.Errorf("ServiceMonitor endpoint %v, want /metrics on http", ep)
	}
	if str(sm, "metadata", "labels", "release") != "kube-prometheus-stack" {
		t.Error("serviceMonitor.additionalLabels are missing")
	}
	svc := one(t, objs, "Service")
	sel, _ := asMap(get(sm, "spec", "selector", "matchLabels"))
	if len(sel) == 0 {
		t.Error("ServiceMonitor has no selector")
	}
	for k, v := range sel {
		if get(svc, "metadata", "labels", k) != v {
			t.Errorf("ServiceMonitor selects %s=%v; the Service has %v", k, v, get(svc, "metadata", "labels", k))
		}
	}
	if n := len(list(svc, "spec", "ports")); n != 1 {
		t.Errorf("Service has %d ports with an external NATS, want 1 (http)", n)
	}

	pvc := one(t, objs, "PersistentVolumeClaim")
	if str(pvc, "spec", "resources", "requests", "storage") != "5Gi" || str(pvc, "spec", "storageClassName") != "fast" {
		t.Errorf("PVC spec %v", get(pvc, "spec"))
	}
	dep := one(t, objs, "Deployment")
	var claim string
	for _, v := range list(dep, "spec", "template", "spec", "volumes") {
		if str(v, "name") == "data" {
			claim = str(v, "persistentVolumeClaim", "claimName")
		}
	}
	if claim != pvc.name() {
		t.Errorf("data volume claims %q, want the PVC %s", claim, pvc.name())
	}
}

func TestTemplateExposeNats(t *testing.T) {
	objs := render(t, "--values", ciValues("default"), "--set", "service.exposeNats=true", "--set", "config.nats.listen=0.0.0.0:4222",
		"--set", "config.nats.token_env=NATS_TOKEN",
		"--set", "secretEnv[0].name=NATS_TOKEN", "--set", "secretEnv[0].secretName=nats", "--set", "secretEnv[0].key=token")
	checkCommon(t, objs)
	svc := one(t, objs, "Service")
	var names []string
	for _, p := range list(svc, "spec", "ports") {
		names = append(names, str(p, "name")+":"+strconv.Itoa(get(p, "port").(int)))
	}
	if !slices.Equal(names, []string{"http:8080", "nats:4222"}) {
		t.Errorf("Service ports %v, want http:8080 nats:4222", names)
	}
}

// TestTemplateRefuses: values the worker would reject in a pod fail the
// render, with the reason.
func TestTemplateRefuses(t *testing.T) {
	token := []string{"--set", "apiToken.value=" + strings.Repeat("t", 32)}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no api token", nil, "apiToken: the operator API needs a token"},
		{"two api tokens", []string{"--set", "apiToken.value=" + strings.Repeat("t", 32), "--set", "apiToken.existingSecret=ops"}, "not both"},
		{"short api token", []string{"--set", "apiToken.value=sekrit-value"}, "shorter than 16 characters"},
		{"loopback api", append([]string{"--set", "config.api.listen=127.0.0.1:8080"}, token...), "is loopback"},
		{"no token", append([]string{"--set", "config.api.tokens=null"}, token...), "config.api.tokens is empty"},
		{"grace", append([]string{"--set", "terminationGracePeriodSeconds=30"}, token...), "must be above config.shutdown_grace"},
		{"data dir", append([]string{"--set", "config.data_dir=./data"}, token...), "config.data_dir"},
		{"replicas embedded", append([]string{"--set", "replicaCount=2"}, token...), "replicaCount > 1"},
		{"replicas memory store", append([]string{"--set", "replicaCount=2", "--set", "config.nats.url=nats://nats:4222",
			"--set", "persistence.enabled=false", "--set", "config.store.url=memory://"}, token...), "a store every replica shares"},
		{"replicas without a seal key", append([]string{"--set", "replicaCount=2", "--set", "config.nats.url=nats://nats:4222",
			"--set", "persistence.enabled=false"}, token...), "needs sealKey.existingSecret"},
		{"expose loopback nats", append([]string{"--set", "service.exposeNats=true"}, token...), "service.exposeNats needs config.nats.listen"},
		{"expose open nats", append([]string{"--set", "service.exposeNats=true", "--set", "config.nats.listen=0.0.0.0:4222"}, token...), "service.exposeNats needs authentication"},
	} {
		out, err := helm(t, append([]string{"template", "aw", chartDir}, tc.args...)...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("%s: helm template %v: err %v, want a failure saying %q\n%s", tc.name, tc.args, err, tc.want, out)
		}
		if strings.Contains(out, "sekrit-value") {
			t.Errorf("%s: the error shows the token: %s", tc.name, out)
		}
	}
}

// TestTheSealKeyComesFromASecret: with sealKey.existingSecret the key is
// mounted from that Secret (the worker's group only) and the config names
// it as seal.key_file; without it nothing is mounted and the worker keeps
// its own key in /data. The chart never makes a key (renders stay equal).
func TestTheSealKeyComesFromASecret(t *testing.T) {
	token := []string{"--set", "apiToken.value=" + strings.Repeat("t", 32)}
	objs := render(t, append([]string{"--set", "sealKey.existingSecret=aw-seal"}, token...)...)
	ch := checkCommon(t, objs)
	if ch.cfg.Seal.KeyFile != "/etc/agent-worker-seal/key" {
		t.Errorf("config seal.key_file %q, want the mounted key", ch.cfg.Seal.KeyFile)
	}
	pod := get(one(t, objs, "Deployment"), "spec", "template", "spec")
	var vol any
	for _, v := range list(pod, "volumes") {
		if str(v, "secret", "secretName") == "aw-seal" {
			vol = v
		}
	}
	if vol == nil || str(get(vol, "secret", "items", 0), "path") != "key" || fmt.Sprint(get(vol, "secret", "defaultMode")) != "288" {
		t.Fatalf("seal volume %v, want Secret aw-seal's key as file key, mode 0440", vol)
	}
	mounted := false
	for _, m := range list(ch.container, "volumeMounts") {
		mounted = mounted || (str(m, "name") == str(vol, "name") && str(m, "mountPath") == "/etc/agent-worker-seal")
	}
	if !mounted {
		t.Error("the seal key is not mounted at /etc/agent-worker-seal")
	}

	plain := checkCommon(t, render(t, token...))
	if plain.cfg.Seal.Configured() {
		t.Errorf("without sealKey.existingSecret the config names a key: %+v", plain.cfg.Seal)
	}
}
