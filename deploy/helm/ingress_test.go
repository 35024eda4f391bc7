package helm_test

import (
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// caller is a pod that may want to reach the worker: its namespace's
// labels and its own.
type caller struct {
	name      string
	namespace map[string]string
	pod       map[string]string
}

var (
	prometheusPod   = caller{"prometheus", map[string]string{"kubernetes.io/metadata.name": "monitoring"}, map[string]string{"app.kubernetes.io/name": "prometheus"}}
	alertmanagerPod = caller{"alertmanager", map[string]string{"kubernetes.io/metadata.name": "monitoring"}, map[string]string{"app.kubernetes.io/name": "alertmanager"}}
	ingestPod       = caller{"ingest sender", map[string]string{"kubernetes.io/metadata.name": "agents"}, map[string]string{"agent-worker-ingest": "true"}}
)

// admits reports whether the policy (in namespace "agents", where
// templateOut renders) lets c connect to the named port, as the API server
// reads NetworkPolicyPeers: no namespaceSelector is the policy's
// namespace, an empty selector selects everything.
func admits(t *testing.T, np *networkingv1.NetworkPolicy, port string, c caller) bool {
	t.Helper()
	matches := func(sel *metav1.LabelSelector, l map[string]string) bool {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			t.Fatalf("selector %v: %v", sel, err)
		}
		return s.Matches(labels.Set(l))
	}
	for _, r := range np.Spec.Ingress {
		portOK := len(r.Ports) == 0
		for _, p := range r.Ports {
			portOK = portOK || (p.Port != nil && p.Port.String() == port)
		}
		if !portOK {
			continue
		}
		for _, peer := range r.From {
			if peer.IPBlock != nil {
				continue
			}
			nsOK := c.namespace["kubernetes.io/metadata.name"] == "agents"
			if peer.NamespaceSelector != nil {
				nsOK = matches(peer.NamespaceSelector, c.namespace)
			}
			podOK := peer.PodSelector == nil || matches(peer.PodSelector, c.pod)
			if nsOK && podOK {
				return true
			}
		}
	}
	return false
}

// TestNetworkPolicyAdmitsCallers: with the NetworkPolicy on, the
// Prometheus of the ServiceMonitor may scrape the port the ServiceMonitor
// names, and Alertmanager and the ingest senders may post when enabled;
// each from the selectors in values. Off, none of them is admitted.
func TestNetworkPolicyAdmitsCallers(t *testing.T) {
	t.Parallel()
	np := func(args ...string) *networkingv1.NetworkPolicy {
		t.Helper()
		return only[*networkingv1.NetworkPolicy](t, decodeAll(t, templateOut(t,
			append([]string{"--values", ciValues("default"), "--set", "networkPolicy.enabled=true"}, args...)...)))
	}

	off := np()
	for _, c := range []caller{prometheusPod, alertmanagerPod, ingestPod} {
		if admits(t, off, "http", c) {
			t.Errorf("no serviceMonitor, alertmanager or ingest: the policy admits %s: %+v", c.name, off.Spec.Ingress)
		}
	}

	m := decodeAll(t, templateOut(t, "--values", ciValues("default"), "--set", "networkPolicy.enabled=true",
		"--set", "serviceMonitor.enabled=true"))
	on := only[*networkingv1.NetworkPolicy](t, m)
	sm := only[*monitoringv1.ServiceMonitor](t, m)
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("ServiceMonitor endpoints %+v, want one", sm.Spec.Endpoints)
	}
	metricsPort := sm.Spec.Endpoints[0].Port
	if !admits(t, on, metricsPort, prometheusPod) {
		t.Errorf("serviceMonitor.enabled: the policy does not admit Prometheus to port %q: %+v", metricsPort, on.Spec.Ingress)
	}
	for _, c := range []caller{alertmanagerPod, ingestPod} {
		if admits(t, on, "http", c) {
			t.Errorf("serviceMonitor.enabled only: the policy admits %s", c.name)
		}
	}
	stranger := caller{"a pod in monitoring", prometheusPod.namespace, map[string]string{"app": "other"}}
	if admits(t, on, metricsPort, stranger) {
		t.Errorf("the Prometheus rule admits any pod of namespace monitoring: %+v", on.Spec.Ingress)
	}

	// Selectors of one's own (Helm merges maps: the default labels are
	// dropped with null); always admits Prometheus without a ServiceMonitor.
	own := np("--values", writeValues(t, `networkPolicy:
  ingress:
    prometheus:
      always: true
      namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: null, team: observability}}
      podSelector: {matchLabels: {app.kubernetes.io/name: null, app: vmagent}}
`))
	vmagent := caller{"vmagent", map[string]string{"team": "observability"}, map[string]string{"app": "vmagent"}}
	if !admits(t, own, "http", vmagent) {
		t.Errorf("prometheus.always with own selectors: %s not admitted: %+v", vmagent.name, own.Spec.Ingress)
	}
	if admits(t, own, "http", prometheusPod) {
		t.Errorf("own selectors: the default Prometheus is still admitted: %+v", own.Spec.Ingress)
	}

	callers := np("--set", "networkPolicy.ingress.alertmanager.enabled=true", "--set", "networkPolicy.ingress.ingest.enabled=true")
	for _, c := range []caller{alertmanagerPod, ingestPod} {
		if !admits(t, callers, "http", c) {
			t.Errorf("alertmanager and ingest enabled: %s not admitted: %+v", c.name, callers.Spec.Ingress)
		}
	}
	if admits(t, callers, "http", caller{"an unlabelled pod", ingestPod.namespace, map[string]string{"app": "other"}}) {
		t.Errorf("ingest enabled: the policy admits every pod of the release namespace: %+v", callers.Spec.Ingress)
	}
}

// TestKubeVersion: the chart refuses a Kubernetes older than 1.27, where
// topologySpreadConstraints' matchLabelKeys is not served.
func TestKubeVersion(t *testing.T) {
	t.Parallel()
	out, err := helm(t, "template", "aw", chartDir, "--values", ciValues("default"), "--kube-version", "1.26.9")
	if err == nil || !strings.Contains(out, ">=1.27.0-0") {
		t.Errorf("Kubernetes 1.26: err %v, want the chart's kubeVersion refused\n%s", err, out)
	}
	templateOut(t, "--values", ciValues("default"), "--kube-version", "1.27.0")
}
