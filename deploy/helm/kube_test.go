package helm_test

// The chart's manifests decoded strictly into the Kubernetes API types
// (client-go's scheme) and the Prometheus Operator's: an unknown or
// misplaced field, a wrong type or a duplicate key is an error, as the API
// server would report it (or, worse, silently drop it).

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	kyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

// kubeScheme knows the built-in kinds and the Prometheus Operator's.
var kubeScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{scheme.AddToScheme, monitoringv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// strictDecoder decodes YAML into the scheme's types; unknown and
// duplicate fields are errors.
var strictDecoder = json.NewSerializerWithOptions(json.DefaultMetaFactory, kubeScheme, kubeScheme,
	json.SerializerOptions{Yaml: true, Strict: true})

// valueSet is one set of values the chart must render.
type valueSet struct {
	name string
	args []string
}

// ciValues is the path of the chart-testing value set ci/<name>-values.yaml.
func ciValues(name string) string {
	return filepath.Join(chartDir, "ci", name+"-values.yaml")
}

// valueSets: every ci/*-values.yaml (the defaults with a token, HA, the
// monitoring objects, the NetworkPolicy) and the override values.
func valueSets(t *testing.T) []valueSet {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil || len(files) < 4 {
		t.Fatalf("ci value sets: %v %v", files, err)
	}
	var sets []valueSet
	for _, f := range files {
		sets = append(sets, valueSet{strings.TrimSuffix(filepath.Base(f), "-values.yaml"), []string{"--values", f}})
	}
	return append(sets, valueSet{"override", []string{"--values", writeValues(t, overrideValues)}})
}

// templateOut runs helm template and returns its output.
func templateOut(t *testing.T, args ...string) string {
	t.Helper()
	out, err := helm(t, append([]string{"template", "aw", chartDir, "--namespace", "agents"}, args...)...)
	if err != nil {
		t.Fatalf("helm template %v: %v\n%s", args, err, out)
	}
	return out
}

// manifests is a render decoded into API objects.
type manifests struct {
	objs []runtime.Object
}

// decodeAll strictly decodes every document of a render.
func decodeAll(t *testing.T, out string) manifests {
	t.Helper()
	var m manifests
	r := kyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(out)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("splitting the render: %v", err)
		}
		if isEmptyDoc(doc) {
			continue
		}
		obj, gvk, err := strictDecoder.Decode(doc, nil, nil)
		if err != nil {
			t.Errorf("strict decoding failed: %v\n%s", err, doc)
			continue
		}
		meta, err := metaOf(obj)
		if err != nil {
			t.Fatalf("%s: %v", gvk, err)
		}
		if errs := validation.IsDNS1123Subdomain(meta.GetName()); len(errs) > 0 {
			t.Errorf("%s %q: invalid name: %v", gvk.Kind, meta.GetName(), errs)
		}
		if meta.GetNamespace() != "" {
			t.Errorf("%s %s sets metadata.namespace %q: leave it to helm --namespace", gvk.Kind, meta.GetName(), meta.GetNamespace())
		}
		checkLabels(t, gvk.Kind+" "+meta.GetName(), meta.GetLabels())
		m.objs = append(m.objs, obj)
	}
	if len(m.objs) == 0 {
		t.Fatal("the render has no objects")
	}
	return m
}

func isEmptyDoc(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		l := bytes.TrimSpace(line)
		if len(l) > 0 && l[0] != '#' && string(l) != "---" {
			return false
		}
	}
	return true
}

func metaOf(obj runtime.Object) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, errors.New("no object metadata")
	}
	return m, nil
}

func checkLabels(t *testing.T, where string, l map[string]string) {
	t.Helper()
	for k, v := range l {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			t.Errorf("%s: label key %q: %v", where, k, errs)
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Errorf("%s: label %s value %q: %v", where, k, v, errs)
		}
	}
}

// all returns the objects of type T.
func all[T runtime.Object](m manifests) []T {
	var out []T
	for _, o := range m.objs {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// only returns the one object of type T.
func only[T runtime.Object](t *testing.T, m manifests) T {
	t.Helper()
	got := all[T](m)
	if len(got) != 1 {
		var zero T
		t.Fatalf("want one %T, got %d", zero, len(got))
	}
	return got[0]
}

// testPod is the `helm test` pod.
func testPod(t *testing.T, m manifests) *corev1.Pod {
	t.Helper()
	var pods []*corev1.Pod
	for _, p := range all[*corev1.Pod](m) {
		if p.Annotations["helm.sh/hook"] == "test" {
			pods = append(pods, p)
		}
	}
	if len(pods) != 1 {
		t.Fatalf("want one helm test pod, got %d", len(pods))
	}
	return pods[0]
}

func selects(t *testing.T, sel *metav1.LabelSelector, l map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatalf("selector %v: %v", sel, err)
	}
	return !s.Empty() && s.Matches(labels.Set(l))
}

func chartVersions(t *testing.T) (version, appVersion string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Version    string `yaml:"version"`
		AppVersion string `yaml:"appVersion"`
	}
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return c.Version, c.AppVersion
}

// checkObjects: what every render must satisfy, on the typed objects.
func checkObjects(t *testing.T, m manifests) {
	t.Helper()
	dep := only[*appsv1.Deployment](t, m)
	pod := dep.Spec.Template
	if !selects(t, dep.Spec.Selector, pod.Labels) {
		t.Errorf("Deployment selector %v does not select its pods %v", dep.Spec.Selector, pod.Labels)
	}
	svc := only[*corev1.Service](t, m)
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) {
		t.Errorf("Service selector %v does not select the pods %v", svc.Spec.Selector, pod.Labels)
	}
	checkPodSecurity(t, "Deployment", pod.Spec)
	if c := pod.Spec.Containers[0]; c.StartupProbe == nil || c.StartupProbe.HTTPGet == nil ||
		c.StartupProbe.HTTPGet.Path != "/healthz" || c.StartupProbe.HTTPGet.Port != intstr.FromString("http") {
		t.Errorf("startupProbe %+v: want GET /healthz on http", c.StartupProbe)
	}

	// The pods' ServiceAccount: the chart's, with no API token.
	if a := pod.Spec.AutomountServiceAccountToken; a == nil || *a {
		t.Errorf("pod automountServiceAccountToken = %v, want false", a)
	}
	sa := only[*corev1.ServiceAccount](t, m)
	if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		t.Errorf("ServiceAccount automountServiceAccountToken = %v, want false", sa.AutomountServiceAccountToken)
	}
	if pod.Spec.ServiceAccountName != sa.Name {
		t.Errorf("pods run as ServiceAccount %q, the chart's is %q", pod.Spec.ServiceAccountName, sa.Name)
	}

	// The helm test pod: the worker's image asks the Service's /readyz.
	tp := testPod(t, m)
	checkPodSecurity(t, "helm test pod", tp.Spec)
	want := []string{"agent-worker", "health", "--api", "http://" + svc.Name + ":" + itoa(svc.Spec.Ports[0].Port)}
	if c := tp.Spec.Containers; len(c) != 1 || !slices.Equal(c[0].Command, want) || c[0].Image != pod.Spec.Containers[0].Image {
		t.Errorf("helm test pod containers %+v: want %q with the worker's image", c, want)
	}
	if tp.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("helm test pod restartPolicy %q, want Never", tp.Spec.RestartPolicy)
	}
	if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(tp.Labels)) {
		t.Errorf("the Service selects the helm test pod (labels %v)", tp.Labels)
	}
	for _, pdb := range all[*policyv1.PodDisruptionBudget](m) {
		if !selects(t, pdb.Spec.Selector, pod.Labels) || selects(t, pdb.Spec.Selector, tp.Labels) {
			t.Errorf("PodDisruptionBudget selector %v: want the worker's pods, not the test pod", pdb.Spec.Selector)
		}
	}
	for _, np := range all[*networkingv1.NetworkPolicy](m) {
		if !selects(t, &np.Spec.PodSelector, pod.Labels) || selects(t, &np.Spec.PodSelector, tp.Labels) {
			t.Errorf("NetworkPolicy podSelector %v: want the worker's pods, not the test pod", np.Spec.PodSelector)
		}
	}
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if !selects(t, c.LabelSelector, pod.Labels) {
			t.Errorf("topology spread constraint %+v does not select the pods", c)
		}
	}
	for _, sm := range all[*monitoringv1.ServiceMonitor](m) {
		if !selects(t, &sm.Spec.Selector, svc.Labels) {
			t.Errorf("ServiceMonitor selector %v does not select the Service %v", sm.Spec.Selector, svc.Labels)
		}
	}
}

func checkPodSecurity(t *testing.T, what string, spec corev1.PodSpec) {
	t.Helper()
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil ||
		psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod securityContext %+v: want runAsNonRoot and the RuntimeDefault seccomp profile", what, psc)
	}
	for _, c := range spec.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("%s: container %s securityContext %+v: want a read-only root, no privilege escalation, capabilities dropped", what, c.Name, sc)
		}
	}
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// TestStrictDecode renders every value set twice: the renders are
// byte-identical, and every manifest decodes strictly into its API type.
func TestStrictDecode(t *testing.T) {
	t.Parallel()
	for _, vs := range valueSets(t) {
		t.Run(vs.name, func(t *testing.T) {
			t.Parallel()
			out := templateOut(t, vs.args...)
			if again := templateOut(t, vs.args...); again != out {
				t.Errorf("two renders of the same values differ: the chart is not deterministic (Argo CD/Flux would see drift)")
			}
			checkObjects(t, decodeAll(t, out))
		})
	}
}

// TestValueSetsLoad: every value set renders a pod the worker runs in
// (checkCommon: config.Load on its config.yaml, with the environment the
// pod gets from its Secrets). Not parallel: it sets that environment.
func TestValueSetsLoad(t *testing.T) {
	for _, vs := range valueSets(t) {
		t.Run(vs.name, func(t *testing.T) {
			objs := render(t, vs.args...)
			c := list(one(t, objs, "Deployment"), "spec", "template", "spec", "containers", 0, "env")
			for _, e := range c {
				if get(e, "valueFrom") != nil {
					t.Setenv(str(e, "name"), "from-a-secret")
				}
			}
			checkCommon(t, objs)
		})
	}
}

func TestImage(t *testing.T) {
	t.Parallel()
	version, appVersion := chartVersions(t)
	if appVersion != version {
		t.Errorf("Chart.yaml appVersion %q, version %q: the chart ships the release it is versioned with", appVersion, version)
	}
	if appVersion == "" || appVersion == "dev" {
		t.Errorf("Chart.yaml appVersion %q is not a release", appVersion)
	}
	image := func(args ...string) string {
		dep := only[*appsv1.Deployment](t, decodeAll(t, templateOut(t, append([]string{"--values", ciValues("default")}, args...)...)))
		return dep.Spec.Template.Spec.Containers[0].Image
	}
	digest := "sha256:" + strings.Repeat("ab", 32)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "agent-worker:" + appVersion},
		{[]string{"--set-string", "image.tag=1.2.3"}, "agent-worker:1.2.3"},
		{[]string{"--set-string", "image.tag=1.2.3", "--set", "image.digest=" + digest}, "agent-worker@" + digest},
	} {
		if got := image(tc.args...); got != tc.want {
			t.Errorf("%v: image %q, want %q", tc.args, got, tc.want)
		}
	}
}

func TestServiceAccount(t *testing.T) {
	t.Parallel()
	m := decodeAll(t, templateOut(t, "--values", ciValues("default"),
		"--set", "serviceAccount.create=false", "--set", "serviceAccount.name=agents"))
	if sa := all[*corev1.ServiceAccount](m); len(sa) != 0 {
		t.Errorf("serviceAccount.create=false still renders %d ServiceAccounts", len(sa))
	}
	if n := only[*appsv1.Deployment](t, m).Spec.Template.Spec.ServiceAccountName; n != "agents" {
		t.Errorf("serviceAccountName %q, want the existing agents", n)
	}
}

// TestPodDisruptionBudget: only with more than one replica.
func TestPodDisruptionBudget(t *testing.T) {
	t.Parallel()
	count := func(args ...string) []*policyv1.PodDisruptionBudget {
		return all[*policyv1.PodDisruptionBudget](decodeAll(t, templateOut(t, args...)))
	}
	if n := len(count("--values", ciValues("default"))); n != 0 {
		t.Errorf("one replica: %d PodDisruptionBudgets, want none", n)
	}
	ha := "--values=" + ciValues("ha")
	pdbs := count(ha)
	if len(pdbs) != 1 || pdbs[0].Spec.MaxUnavailable == nil || *pdbs[0].Spec.MaxUnavailable != intstr.FromInt32(1) || pdbs[0].Spec.MinAvailable != nil {
		t.Errorf("three replicas: PodDisruptionBudgets %+v, want one with maxUnavailable 1", pdbs)
	}
	pdbs = count(ha, "--set", "podDisruptionBudget.minAvailable=2")
	if len(pdbs) != 1 || pdbs[0].Spec.MinAvailable == nil || *pdbs[0].Spec.MinAvailable != intstr.FromInt32(2) || pdbs[0].Spec.MaxUnavailable != nil {
		t.Errorf("minAvailable=2: PodDisruptionBudgets %+v, want minAvailable 2 only", pdbs)
	}
	if n := len(count(ha, "--set", "podDisruptionBudget.enabled=false")); n != 0 {
		t.Errorf("podDisruptionBudget.enabled=false: %d PodDisruptionBudgets", n)
	}
}

func TestTopologySpread(t *testing.T) {
	t.Parallel()
	spread := func(args ...string) []corev1.TopologySpreadConstraint {
		m := decodeAll(t, templateOut(t, args...))
		return only[*appsv1.Deployment](t, m).Spec.Template.Spec.TopologySpreadConstraints
	}
	if c := spread("--values", ciValues("default")); len(c) != 0 {
		t.Errorf("one replica: constraints %+v, want none", c)
	}
	c := spread("--values", ciValues("ha"))
	if len(c) != 1 || c[0].TopologyKey != "kubernetes.io/hostname" || c[0].WhenUnsatisfiable != corev1.ScheduleAnyway || c[0].MaxSkew != 1 {
		t.Errorf("three replicas: constraints %+v, want a soft spread over hostnames", c)
	}
	c = spread("--values", ciValues("ha"), "--values", writeValues(t, `
topologySpreadConstraints:
  - {maxSkew: 2, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}
`))
	if len(c) != 1 || c[0].TopologyKey != "topology.kubernetes.io/zone" || c[0].LabelSelector == nil {
		t.Errorf("own constraints %+v: want the zone constraint with the chart's labelSelector", c)
	}
}

func TestNetworkPolicy(t *testing.T) {
	t.Parallel()
	if np := all[*networkingv1.NetworkPolicy](decodeAll(t, templateOut(t, "--values", ciValues("default")))); len(np) != 0 {
		t.Errorf("networkPolicy.enabled=false renders %d NetworkPolicies", len(np))
	}

	m := decodeAll(t, templateOut(t, "--values", ciValues("networkpolicy")))
	np := only[*networkingv1.NetworkPolicy](t, m)
	tp := testPod(t, m)
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}) {
		t.Errorf("policyTypes %v, want Ingress and Egress", np.Spec.PolicyTypes)
	}
	if len(np.Spec.Ingress) != 1 {
		t.Fatalf("ingress rules %+v, want one", np.Spec.Ingress)
	}
	in := np.Spec.Ingress[0]
	if ports := ingressPorts(in); !slices.Equal(ports, []string{"TCP/http"}) {
		t.Errorf("ingress ports %v, want TCP/http", ports)
	}
	var fromTest, fromMonitoring bool
	for _, p := range in.From {
		if p.PodSelector != nil && p.NamespaceSelector == nil && selects(t, p.PodSelector, tp.Labels) {
			fromTest = true
		}
		if p.NamespaceSelector != nil && p.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] == "monitoring" {
			fromMonitoring = true
		}
	}
	if !fromTest || !fromMonitoring || len(in.From) != 4 {
		t.Errorf("ingress from %+v: want the test pod, namespace monitoring, the alertmanager pods and the ipBlock", in.From)
	}

	// Egress: DNS, the external NATS, Redis, the models, the extra rule.
	var got []string
	for _, e := range np.Spec.Egress {
		got = append(got, egressPorts(e)...)
	}
	want := []string{"UDP/53", "TCP/53", "TCP/4222", "TCP/6379", "TCP/443", "TCP/8443"}
	if !slices.Equal(got, want) {
		t.Errorf("egress ports %v, want %v", got, want)
	}
	for _, e := range np.Spec.Egress {
		if len(e.To) == 0 {
			t.Errorf("egress rule %+v is open to any destination; the value set names them all", e)
		}
	}

	// The embedded NATS server exposed: its port in, no NATS or Redis out.
	m = decodeAll(t, templateOut(t, "--values", ciValues("default"),
		"--set", "networkPolicy.enabled=true", "--set", "service.exposeNats=true", "--set", "config.nats.listen=0.0.0.0:4222",
		"--set", "config.nats.token_env=NATS_TOKEN",
		"--set", "secretEnv[0].name=NATS_TOKEN", "--set", "secretEnv[0].secretName=nats", "--set", "secretEnv[0].key=token"))
	np = only[*networkingv1.NetworkPolicy](t, m)
	if ports := ingressPorts(np.Spec.Ingress[0]); !slices.Equal(ports, []string{"TCP/http", "TCP/nats"}) {
		t.Errorf("exposed NATS: ingress ports %v, want http and nats", ports)
	}
	got = nil
	for _, e := range np.Spec.Egress {
		got = append(got, egressPorts(e)...)
	}
	if want := []string{"UDP/53", "TCP/53", "TCP/443"}; !slices.Equal(got, want) {
		t.Errorf("embedded NATS, NATS store: egress ports %v, want %v", got, want)
	}
}

func ingressPorts(r networkingv1.NetworkPolicyIngressRule) []string {
	return portStrings(r.Ports)
}

func egressPorts(r networkingv1.NetworkPolicyEgressRule) []string {
	return portStrings(r.Ports)
}

func portStrings(ports []networkingv1.NetworkPolicyPort) []string {
	var out []string
	for _, p := range ports {
		proto := "TCP"
		if p.Protocol != nil {
			proto = string(*p.Protocol)
		}
		out = append(out, proto+"/"+p.Port.String())
	}
	return out
}

// TestSchemaRejects: the schema turns typos and wrong types into render
// failures, naming the value.
func TestSchemaRejects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		set  string
		want string
	}{
		{"replicaCount=two", "/replicaCount"},
		{"securityContext.runAsNonroot=true", "runAsNonroot"},
		{"podSecurityContext.runAsNonroot=true", "runAsNonroot"},
		{"replicas=3", "replicas"},
		{"image.tga=1.0", "tga"},
		{"config=worker.yaml", "/config"},
		{"service.port=http", "/service/port"},
		{"livenessProbe.path=/live", "path"},
		{"networkPolicy.egress.models.ports[0]=https", "/networkPolicy/egress/models/ports/0"},
		{"podDisruptionBudget.maxUnavailable=one", "/podDisruptionBudget/maxUnavailable"},
		{"prometheusRule.enable=true", "enable"},
		{"serviceAccount.automount=true", "automount"},
		{"image.digest=latest", "/image/digest"},
	} {
		out, err := helm(t, "template", "aw", chartDir, "--values", ciValues("default"), "--set", tc.set)
		if err == nil || !strings.Contains(out, "values don't meet the specifications of the schema") || !strings.Contains(out, tc.want) {
			t.Errorf("--set %s: err %v, want a schema error naming %q\n%s", tc.set, err, tc.want, out)
		}
	}
	// config is the worker's, free-form: keys the chart does not know pass.
	templateOut(t, "--values", ciValues("default"), "--set", "config.some_future_key=1")
}

// TestNotes: NOTES.txt names the version and commands that work with the
// token's Secret. helm renders NOTES only with a cluster (install), so a
// copy of the chart renders it as a ConfigMap.
func TestNotes(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "agent-worker")
	if err := os.CopyFS(dir, os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	notes, err := os.ReadFile(filepath.Join(chartDir, "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "files", "notes-under-test.txt"), notes, 0o644); err != nil {
		t.Fatal(err)
	}
	probe := `apiVersion: v1
kind: ConfigMap
metadata: {name: notes}
data:
  notes: {{ tpl (.Files.Get "files/notes-under-test.txt") . | quote }}
`
	if err := os.WriteFile(filepath.Join(dir, "templates", "zz-notes.yaml"), []byte(probe), 0o644); err != nil {
		t.Fatal(err)
	}
	_, appVersion := chartVersions(t)
	for _, tc := range []struct {
		values string
		want   []string
	}{
		{ciValues("default"), []string{
			"agent-worker " + appVersion + " (image agent-worker:" + appVersion + ")",
			"helm test aw -n agents",
			"kubectl -n agents get secret aw-agent-worker-token",
			"jsonpath='{.data.token}'",
			"agent-worker status --api http://127.0.0.1:8080",
			`-H "Authorization: Bearer $AGENT_WORKER_TOKEN" http://127.0.0.1:8080/v1/agents`,
			"kubectl -n agents port-forward svc/aw-agent-worker 8080:8080",
			"/v1/agents/demo/messages",
			"WARNING: the embedded NATS server",
		}},
		{ciValues("ha"), []string{
			"image ghcr.io/agent-worker/agent-worker@sha256:",
			"3 replica(s)",
			"kubectl -n agents get secret agent-worker-token",
			"jsonpath='{.data.bearer}'",
			"--nats nats://nats.messaging.svc:4222",
		}},
		{ciValues("monitoring"), []string{
			`job="aw-agent-worker", namespace="agents"`,
			"Runbook: https://github.com/agent-worker/agent-worker/blob/main/docs/alerts.md",
		}},
		{writeValues(t, "apiToken: {value: ci-token-0123456789abcdef}\nserviceMonitor: {enabled: true}\n"+
			"networkPolicy: {enabled: true, ingress: {ingest: {enabled: true}, namespaces: [ops]}}\n"), []string{
			"NetworkPolicy aw-agent-worker admits to port 8080 (API, /metrics, status page) only:",
			"- Prometheus: pods app.kubernetes.io/name=prometheus in namespaces kubernetes.io/metadata.name=monitoring",
			"- not Alertmanager (networkPolicy.ingress.alertmanager.enabled is false)",
			"- message and webhook senders: pods agent-worker-ingest=true in namespace agents",
			"- every pod in namespace ops",
		}},
	} {
		out, err := helm(t, "template", "aw", dir, "--namespace", "agents", "--values", tc.values, "--show-only", "templates/zz-notes.yaml")
		if err != nil {
			t.Fatalf("rendering NOTES.txt with %s: %v\n%s", tc.values, err, out)
		}
		var cm struct {
			Data map[string]string `yaml:"data"`
		}
		if err := yaml.Unmarshal([]byte(out), &cm); err != nil {
			t.Fatal(err)
		}
		text := cm.Data["notes"]
		for _, w := range tc.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s: NOTES.txt lacks %q:\n%s", filepath.Base(tc.values), w, text)
			}
		}
	}
}

// TestStrictDecoderRejects: the decoder the other tests rely on refuses
// unknown fields, wrong types and duplicate keys, for built-in kinds and
// the Prometheus Operator's.
func TestStrictDecoderRejects(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{
		"apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a}\nautomountServiceAcountToken: false\n",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\nspec: {replicas: two}\n",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  securityContext: {runAsNonroot: true}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: a, name: b}\n",
		"apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: a}\nspec: {endpoints: [{port: http, intervall: 30s}]}\n",
		"apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata: {name: a}\nspec: {groups: [{name: g, rules: [{alert: A, expr: up, severity: page}]}]}\n",
		"apiVersion: example.com/v1\nkind: Unknown\nmetadata: {name: a}\n",
	} {
		if _, _, err := strictDecoder.Decode([]byte(doc), nil, nil); err == nil {
			t.Errorf("strict decoding accepted:\n%s", doc)
		}
	}
	good := "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a}\nautomountServiceAccountToken: false\n"
	if _, _, err := strictDecoder.Decode([]byte(good), nil, nil); err != nil {
		t.Errorf("strict decoding refused a valid ServiceAccount: %v", err)
	}
}
