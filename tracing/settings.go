package tracing

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/agent-worker/agent-worker/config"
)

// Settings are the resolved telemetry settings: the config file's keys,
// each falling back to its OTEL_* environment variable, then to its
// default.
type Settings struct {
	// Endpoint is the OTLP receiver; "" means tracing is off.
	Endpoint string
	// Protocol is config.ProtocolGRPC or config.ProtocolHTTP.
	Protocol string
	// ServiceName is the service.name resource attribute.
	ServiceName string
	// Sampler is one of config.SamplerNames; SamplerArg its ratio.
	Sampler    string
	SamplerArg float64
	// Headers go with every export.
	Headers map[string]string
	// CaptureContent keeps the tool calls' arguments and results on the
	// spans (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true, which
	// also makes ADK log prompts and answers); off, they are left out.
	CaptureContent bool
}

// Defaults of Settings.
const (
	DefaultServiceName = "agent-worker"
	DefaultSampler     = "parentbased_always_on"
)

// On reports whether traces are exported.
func (s Settings) On() bool { return s.Endpoint != "" }

// Resolve fills c's unset keys from the environment (lookup is
// os.LookupEnv in the command) and the defaults, and checks what the
// environment supplied: a bad OTEL_* value is an error naming the
// variable. OTEL_SDK_DISABLED=true turns tracing off whatever is set.
func Resolve(c config.Telemetry, lookup func(string) (string, bool)) (Settings, error) {
	env := func(names ...string) (string, string) {
		for _, n := range names {
			if v, ok := lookup(n); ok && strings.TrimSpace(v) != "" {
				return strings.TrimSpace(v), n
			}
		}
		return "", ""
	}
	if v, _ := env("OTEL_SDK_DISABLED"); strings.EqualFold(v, "true") {
		return Settings{}, nil
	}
	var errs []error
	s := Settings{Endpoint: c.Endpoint, Protocol: c.Protocol, ServiceName: c.ServiceName, Sampler: c.Sampler, SamplerArg: 1}
	if s.Endpoint == "" {
		if v, name := env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"); v != "" {
			if msg := config.CheckOTLPEndpoint(v); msg != "" {
				errs = append(errs, fmt.Errorf("%s: %s", name, msg))
			}
			s.Endpoint = v
		}
	}
	if s.Protocol == "" {
		v, name := env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
		switch v {
		case "":
			s.Protocol = config.ProtocolHTTP
		case config.ProtocolGRPC, config.ProtocolHTTP:
			s.Protocol = v
		default:
			errs = append(errs, fmt.Errorf("%s: must be %q or %q; got %q", name, config.ProtocolGRPC, config.ProtocolHTTP, v))
		}
	}
	if s.ServiceName == "" {
		s.ServiceName, _ = env("OTEL_SERVICE_NAME")
		if s.ServiceName == "" {
			s.ServiceName = DefaultServiceName
		}
	}
	if s.Sampler == "" {
		v, name := env("OTEL_TRACES_SAMPLER")
		switch {
		case v == "":
			s.Sampler = DefaultSampler
		case slices.Contains(config.SamplerNames, v):
			s.Sampler = v
		default:
			errs = append(errs, fmt.Errorf("%s: must be one of %s; got %q", name, strings.Join(config.SamplerNames, ", "), v))
		}
	}
	if c.SamplerArg != nil {
		s.SamplerArg = *c.SamplerArg
	} else if v, name := env("OTEL_TRACES_SAMPLER_ARG"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f > 1 {
			errs = append(errs, fmt.Errorf("%s: must be a ratio from 0 to 1; got %q", name, v))
		} else {
			s.SamplerArg = f
		}
	}
	if v, name := env("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"); v != "" {
		h, err := parseHeaders(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
		s.Headers = h
	}
	for k, v := range c.Headers {
		if s.Headers == nil {
			s.Headers = map[string]string{}
		}
		s.Headers[k] = v
	}
	if v, _ := env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"); strings.EqualFold(v, "true") {
		s.CaptureContent = true
	}
	if err := errors.Join(errs...); err != nil {
		return Settings{}, fmt.Errorf("telemetry: %w", err)
	}
	return s, nil
}

// parseHeaders reads the OTLP headers variable's "k1=v1,k2=v2" (values
// URL-encoded, as the specification has them).
func parseHeaders(v string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("want k1=v1,k2=v2; got %q", kv)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(val)
	}
	return out, nil
}
