package config

import (
	"slices"
	"testing"
)

// The telemetry keys are checked with file:line; the environment is not
// read here (tracing.Resolve does, at start-up).
func TestTelemetry(t *testing.T) {
	t.Parallel()
	const head = "models: {m: {provider: scripted, script: [{text: ok}]}}\nagents: [{name: oncall, model: m}]\n"
	for _, c := range []struct {
		name, yaml string
		errs       []string
	}{
		{"ok http", "telemetry: {endpoint: \"http://collector:4318\", protocol: http/protobuf, sampler: traceidratio, sampler_arg: 0.25, headers: {x-api-key: k}}\n", nil},
		{"ok grpc host:port", "telemetry: {endpoint: \"collector:4317\", protocol: grpc}\n", nil},
		{"bad", `
telemetry:
  endpoint: "ftp://collector"
  protocol: thrift
  sampler: sometimes
  sampler_arg: 2
  headers: {"bad name": v}
`, []string{
			`config.yaml:5: telemetry.endpoint: scheme must be http or https; got "ftp://collector"`,
			`config.yaml:6: telemetry.protocol: must be "grpc" or "http/protobuf"; got "thrift"`,
			`config.yaml:7: telemetry.sampler: must be one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio; got "sometimes"`,
			`config.yaml:8: telemetry.sampler_arg: must be a ratio from 0 to 1; got 2`,
			`config.yaml:9: telemetry.headers: header name "bad name" is not a valid HTTP header name`,
		}},
		{"no host", "telemetry: {endpoint: \"http://\"}\n", []string{`config.yaml:3: telemetry.endpoint: has no host: "http://"`}},
		{"bare word", "telemetry: {endpoint: collector}\n", []string{`config.yaml:3: telemetry.endpoint: want http://host:port, https://host:port or host:port; got "collector"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, errs := loadText(t, "\n"+head+c.yaml)
			if !slices.Equal(errs, c.errs) {
				t.Errorf("errors:\n got %q\nwant %q", errs, c.errs)
			}
		})
	}
}
