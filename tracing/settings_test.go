package tracing

import (
	"fmt"
	"testing"

	"github.com/agent-worker/agent-worker/config"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestResolve(t *testing.T) {
	t.Parallel()
	half := 0.5
	for _, c := range []struct {
		name string
		cfg  config.Telemetry
		env  map[string]string
		want Settings
		err  string
	}{
		{name: "off by default", want: Settings{Protocol: config.ProtocolHTTP, ServiceName: DefaultServiceName, Sampler: DefaultSampler, SamplerArg: 1}},
		{name: "the standard variables", env: map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_SERVICE_NAME": "triage",
			"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.1", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=s3cret, tenant=a",
			"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
		}, want: Settings{Endpoint: "http://collector:4317", Protocol: "grpc", ServiceName: "triage", Sampler: "traceidratio", SamplerArg: 0.1,
			Headers: map[string]string{"api-key": "s3cret", "tenant": "a"}, CaptureContent: true}},
		{name: "the traces variables before the general ones", env: map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://general:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://traces:4318/v1/traces",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
		}, want: Settings{Endpoint: "http://traces:4318/v1/traces", Protocol: "http/protobuf", ServiceName: DefaultServiceName, Sampler: DefaultSampler, SamplerArg: 1}},
		{name: "the file wins", cfg: config.Telemetry{Endpoint: "http://file:4318", Protocol: "http/protobuf", ServiceName: "file", Sampler: "always_on", SamplerArg: &half,
			Headers: map[string]string{"tenant": "file"}},
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_SERVICE_NAME": "env",
				"OTEL_TRACES_SAMPLER": "always_off", "OTEL_TRACES_SAMPLER_ARG": "0.9", "OTEL_EXPORTER_OTLP_HEADERS": "tenant=env,other=1"},
			want: Settings{Endpoint: "http://file:4318", Protocol: "http/protobuf", ServiceName: "file", Sampler: "always_on", SamplerArg: 0.5,
				Headers: map[string]string{"tenant": "file", "other": "1"}}},
		{name: "disabled", cfg: config.Telemetry{Endpoint: "http://file:4318"}, env: map[string]string{"OTEL_SDK_DISABLED": "true"}},
		{name: "bad variables are named", env: map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "collector", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_TRACES_SAMPLER": "maybe",
			"OTEL_TRACES_SAMPLER_ARG": "1.5", "OTEL_EXPORTER_OTLP_HEADERS": "novalue",
		}, err: `telemetry: OTEL_EXPORTER_OTLP_ENDPOINT: want http://host:port, https://host:port or host:port; got "collector"
OTEL_EXPORTER_OTLP_PROTOCOL: must be "grpc" or "http/protobuf"; got "http/json"
OTEL_TRACES_SAMPLER: must be one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio; got "maybe"
OTEL_TRACES_SAMPLER_ARG: must be a ratio from 0 to 1; got "1.5"
OTEL_EXPORTER_OTLP_HEADERS: want k1=v1,k2=v2; got "novalue"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := Resolve(c.cfg, env(c.env))
			if c.err != "" {
				if err == nil || err.Error() != c.err {
					t.Fatalf("err = %v\nwant %s", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.On() != (c.want.Endpoint != "") {
				t.Errorf("On() = %v", got.On())
			}
			if g, w := describe(got), describe(c.want); g != w {
				t.Errorf("got  %s\nwant %s", g, w)
			}
		})
	}
}

// describe prints s for comparison (fmt sorts the map's keys; a nil and
// an empty map print alike).
func describe(s Settings) string {
	return fmt.Sprintf("%s|%s|%s|%s|%g|%v|content=%v", s.Endpoint, s.Protocol, s.ServiceName, s.Sampler, s.SamplerArg, s.Headers, s.CaptureContent)
}
