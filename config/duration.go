package config

import (
	"fmt"
	"time"

	"gopkg.in/yaml.v3"
)

// String formats d like time.Duration ("1h30m0s").
func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML reads a duration written for time.ParseDuration ("30s",
// "5m", "1h30m") or a bare 0. A number without a unit other than 0 and a
// negative duration are errors: "30" is ambiguous and no duration in the
// schema can sensibly be negative.
//
// Errors are returned as *yaml.TypeError so that yaml.v3 keeps decoding and
// reports every bad value, not just the first.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return durationError(n, "want a duration like 30s or 1h30m, got %s", describeNode(n))
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return durationError(n, "bad duration %q: want a number and a unit, like 30s, 5m or 1h30m", n.Value)
	}
	if v < 0 {
		return durationError(n, "negative duration %q", n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes d in the form UnmarshalYAML reads.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

func durationError(n *yaml.Node, format string, args ...any) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: ", n.Line) + fmt.Sprintf(format, args...)}}
}
