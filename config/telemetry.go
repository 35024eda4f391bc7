package config

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Telemetry configures OpenTelemetry traces (package tracing). Every key
// is optional and falls back to its standard OTEL_* environment variable
// (named on each key); a key the file sets wins over the variable.
// Tracing is off unless an endpoint is set here or in the environment.
type Telemetry struct {
	// Endpoint is the OTLP receiver: "http://collector:4318" for
	// http/protobuf, "http://collector:4317" (or host:port) for grpc. An
	// http:// endpoint is sent to in clear text, https:// over TLS.
	// Environment: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, then
	// OTEL_EXPORTER_OTLP_ENDPOINT. Empty: no traces.
	Endpoint string `yaml:"endpoint"`
	// Protocol is "grpc" or "http/protobuf". Environment:
	// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, then OTEL_EXPORTER_OTLP_PROTOCOL.
	// Default "http/protobuf", the OTLP specification's default.
	Protocol string `yaml:"protocol"`
	// ServiceName is the service.name of every span. Environment:
	// OTEL_SERVICE_NAME. Default "agent-worker".
	ServiceName string `yaml:"service_name"`
	// Sampler is one of SamplerNames. Environment: OTEL_TRACES_SAMPLER.
	// Default "parentbased_always_on": every turn is traced.
	Sampler string `yaml:"sampler"`
	// SamplerArg is the ratio of the traceidratio samplers, 0 to 1.
	// Environment: OTEL_TRACES_SAMPLER_ARG. Default 1.
	SamplerArg *float64 `yaml:"sampler_arg"`
	// Headers are sent with every export (an API key of a hosted
	// backend). Environment: OTEL_EXPORTER_OTLP_HEADERS
	// ("k1=v1,k2=v2"); a key the file sets wins over the same key there.
	Headers map[string]string `yaml:"headers"`
}

// Telemetry protocols.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// SamplerNames are the samplers telemetry.sampler (and
// OTEL_TRACES_SAMPLER) may name, as the OpenTelemetry specification names
// them. The parentbased ones follow the sampling decision of a parent;
// a turn's span is a root (its inputs are links, not parents), so for
// turns they behave like their root sampler.
var SamplerNames = []string{
	"always_on", "always_off", "traceidratio",
	"parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio",
}

// telemetry checks the keys the file sets; the environment is checked
// where it is read (tracing.Resolve), at start-up.
func (v *validator) telemetry(c *Config) {
	var root path
	p := root.key("telemetry")
	t := c.Telemetry
	if t.Endpoint != "" {
		if msg := CheckOTLPEndpoint(t.Endpoint); msg != "" {
			v.at(p.key("endpoint"), "%s", msg)
		}
	}
	if t.Protocol != "" && t.Protocol != ProtocolGRPC && t.Protocol != ProtocolHTTP {
		v.at(p.key("protocol"), "must be %q or %q; got %q", ProtocolGRPC, ProtocolHTTP, t.Protocol)
	}
	if t.Sampler != "" && !slices.Contains(SamplerNames, t.Sampler) {
		v.at(p.key("sampler"), "must be one of %s; got %q", strings.Join(SamplerNames, ", "), t.Sampler)
	}
	if a := t.SamplerArg; a != nil && (*a < 0 || *a > 1) {
		v.at(p.key("sampler_arg"), "must be a ratio from 0 to 1; got %v", *a)
	}
	for k := range t.Headers {
		if k == "" || strings.ContainsAny(k, " \t\r\n:") {
			v.at(p.key("headers"), "header name %q is not a valid HTTP header name", k)
		}
	}
}

// CheckOTLPEndpoint says what is wrong with an OTLP endpoint, or "" when
// it is usable: an http:// or https:// URL with a host, or a bare
// host:port (grpc's habit).
func CheckOTLPEndpoint(e string) string {
	if !strings.Contains(e, "://") {
		if host, port, ok := strings.Cut(e, ":"); ok && host != "" && port != "" && !strings.ContainsAny(e, "/ ") {
			return ""
		}
		return "want http://host:port, https://host:port or host:port; got " + strconv.Quote(e)
	}
	u, err := url.Parse(e)
	switch {
	case err != nil:
		return "not a URL: " + err.Error()
	case u.Scheme != "http" && u.Scheme != "https":
		return "scheme must be http or https; got " + strconv.Quote(e)
	case u.Host == "":
		return "has no host: " + strconv.Quote(e)
	}
	return ""
}
