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
	env := envReader(lookup)
	if v, _ := env("OTEL_SDK_DISABLED"); strings.EqualFold(v, "true") {
		return Settings{}, nil
	}
	// errors.Join drops the nil errors, so each step's error is appended
	// as it comes and the order of the messages is the order of the keys.
	var errs []error
	var err error
	s := Settings{Endpoint: c.Endpoint, Protocol: c.Protocol, ServiceName: c.ServiceName, Sampler: c.Sampler}
	if s.Endpoint == "" {
		s.Endpoint, err = envEndpoint(env)
		errs = append(errs, err)
	}
	if s.Protocol == "" {
		s.Protocol, err = envProtocol(env)
		errs = append(errs, err)
	}
	if s.ServiceName == "" {
		s.ServiceName = envServiceName(env)
	}
	if s.Sampler == "" {
		s.Sampler, err = envSampler(env)
		errs = append(errs, err)
	}
	s.SamplerArg, err = samplerArg(c.SamplerArg, env)
	errs = append(errs, err)
	s.Headers, err = exportHeaders(c.Headers, env)
	errs = append(errs, err)
	if v, _ := env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"); strings.EqualFold(v, "true") {
		s.CaptureContent = true
	}
	if err := errors.Join(errs...); err != nil {
		return Settings{}, fmt.Errorf("telemetry: %w", err)
	}
	return s, nil
}

// envFunc returns the first of names whose value is not blank, trimmed,
// and that name, so an error can name the variable the value came from;
// "" and "" when none is set.
type envFunc func(names ...string) (value, name string)

// envReader makes an envFunc over lookup. Blank values count as unset,
// so the generic variable still applies when the traces-specific one is
// set but empty.
func envReader(lookup func(string) (string, bool)) envFunc {
	return func(names ...string) (string, string) {
		for _, n := range names {
			if v, ok := lookup(n); ok && strings.TrimSpace(v) != "" {
				return strings.TrimSpace(v), n
			}
		}
		return "", ""
	}
}

// envEndpoint is the OTLP traces endpoint from the environment, "" (off)
// when none is set. A malformed one is kept but reported.
func envEndpoint(env envFunc) (string, error) {
	v, name := env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
	if v == "" {
		return "", nil
	}
	if msg := config.CheckOTLPEndpoint(v); msg != "" {
		return v, fmt.Errorf("%s: %s", name, msg)
	}
	return v, nil
}

// envProtocol is the OTLP protocol from the environment, HTTP when none
// is set; anything but the two protocols the exporter speaks is an error.
func envProtocol(env envFunc) (string, error) {
	v, name := env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	switch v {
	case "":
		return config.ProtocolHTTP, nil
	case config.ProtocolGRPC, config.ProtocolHTTP:
		return v, nil
	}
	return "", fmt.Errorf("%s: must be %q or %q; got %q", name, config.ProtocolGRPC, config.ProtocolHTTP, v)
}

// envServiceName is OTEL_SERVICE_NAME, DefaultServiceName when unset.
func envServiceName(env envFunc) string {
	if v, _ := env("OTEL_SERVICE_NAME"); v != "" {
		return v
	}
	return DefaultServiceName
}

// envSampler is OTEL_TRACES_SAMPLER, DefaultSampler when unset; only the
// samplers config.SamplerNames lists are accepted, the same names the
// configuration's sampler key takes.
func envSampler(env envFunc) (string, error) {
	v, name := env("OTEL_TRACES_SAMPLER")
	switch {
	case v == "":
		return DefaultSampler, nil
	case slices.Contains(config.SamplerNames, v):
		return v, nil
	}
	return "", fmt.Errorf("%s: must be one of %s; got %q", name, strings.Join(config.SamplerNames, ", "), v)
}

// samplerArg is the sampler's ratio: the configured one, else
// OTEL_TRACES_SAMPLER_ARG, else 1 (sample everything the sampler lets
// through).
func samplerArg(configured *float64, env envFunc) (float64, error) {
	if configured != nil {
		return *configured, nil
	}
	v, name := env("OTEL_TRACES_SAMPLER_ARG")
	if v == "" {
		return 1, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || f > 1 {
		return 1, fmt.Errorf("%s: must be a ratio from 0 to 1; got %q", name, v)
	}
	return f, nil
}

// exportHeaders are the headers from the environment overlaid with the
// configured ones, so the configuration wins key by key; nil when there
// are none.
func exportHeaders(configured map[string]string, env envFunc) (map[string]string, error) {
	var h map[string]string
	var err error
	if v, name := env("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"); v != "" {
		h, err = parseHeaders(v)
		if err != nil {
			err = fmt.Errorf("%s: %w", name, err)
		}
	}
	for k, v := range configured {
		if h == nil {
			h = map[string]string{}
		}
		h[k] = v
	}
	return h, err
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
