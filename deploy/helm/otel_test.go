package helm_test

import (
	"slices"
	"testing"
)

// TestTemplateOtel: otel.endpoint passes the OTEL_* variables to the
// worker and opens the NetworkPolicy's egress to the receiver; without
// it, neither.
func TestTemplateOtel(t *testing.T) {
	env := func(objs []object) map[string]string {
		out := map[string]string{}
		for _, e := range list(one(t, objs, "Deployment"), "spec", "template", "spec", "containers", 0, "env") {
			out[str(e, "name")] = str(e, "value")
		}
		return out
	}
	egressPorts := func(objs []object) []int {
		var ports []int
		for _, r := range list(one(t, objs, "NetworkPolicy"), "spec", "egress") {
			for _, p := range list(r, "ports") {
				if n, ok := get(p, "port").(int); ok {
					ports = append(ports, n)
				}
			}
		}
		return ports
	}
	off := render(t, "--values", ciValues("default"), "--set", "networkPolicy.enabled=true")
	checkCommon(t, off)
	if v, ok := env(off)["OTEL_EXPORTER_OTLP_ENDPOINT"]; ok {
		t.Errorf("no otel.endpoint, yet OTEL_EXPORTER_OTLP_ENDPOINT=%q", v)
	}
	if slices.Contains(egressPorts(off), 4317) {
		t.Error("no otel.endpoint, yet egress to 4317")
	}

	on := render(t, "--values", ciValues("default"), "--set", "networkPolicy.enabled=true",
		"--set", "otel.endpoint=http://jaeger-collector.observability:4317", "--set", "otel.protocol=grpc",
		"--set", "otel.sampler=traceidratio", "--set", "otel.samplerArg=0.1")
	checkCommon(t, on)
	got := env(on)
	for k, want := range map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger-collector.observability:4317",
		"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
		"OTEL_SERVICE_NAME":           "aw-agent-worker",
		"OTEL_TRACES_SAMPLER":         "traceidratio",
		"OTEL_TRACES_SAMPLER_ARG":     "0.1",
	} {
		if got[k] != want {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
	if p := egressPorts(on); !slices.Contains(p, 4317) || !slices.Contains(p, 4318) {
		t.Errorf("egress ports %v lack the OTLP receiver's 4317 and 4318", p)
	}
}
