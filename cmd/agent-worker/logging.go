package main

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agent-worker/agent-worker/config"
)

// Environment variables for the log settings; the flags --log-format and
// --log-level win over them, and they win over the config file's log
// section.
const (
	envLogFormat = "AGENT_WORKER_LOG_FORMAT"
	envLogLevel  = "AGENT_WORKER_LOG_LEVEL"
)

var (
	logFormats = []string{"text", "json"}
	logLevels  = []string{"debug", "info", "warn", "error"}
)

// addLogFlags adds the persistent log flags to root.
func (c *cli) addLogFlags(root *cobra.Command) {
	f := root.PersistentFlags()
	f.StringVar(&c.logFlags.Format, "log-format", "", "log format on stderr: text or json (default: $"+envLogFormat+", the config's log.format, text)")
	f.StringVar(&c.logFlags.Level, "log-level", "", "log level: debug, info, warn or error (default: $"+envLogLevel+", the config's log.level, info)")
}

// logSettings decides the log format and level: the flag, else the
// environment variable, else the config file (once run has read one),
// else text and info. A value that is none of the allowed ones is an
// error naming where it came from.
func (c *cli) logSettings() (config.Log, error) {
	format, err := pick(logFormats,
		source{"--log-format", c.logFlags.Format}, source{envLogFormat, c.env.get(envLogFormat)}, source{"log.format", c.logFile.Format}, source{"", "text"})
	if err != nil {
		return config.Log{}, err
	}
	level, err := pick(logLevels,
		source{"--log-level", c.logFlags.Level}, source{envLogLevel, c.env.get(envLogLevel)}, source{"log.level", c.logFile.Level}, source{"", "info"})
	return config.Log{Format: format, Level: level}, err
}

// source is one place a setting may come from, and its value there ("":
// not set).
type source struct{ name, value string }

// pick returns the first set value of sources, checked against allowed.
func pick(allowed []string, sources ...source) (string, error) {
	for _, s := range sources {
		if s.value == "" {
			continue
		}
		v := strings.ToLower(strings.TrimSpace(s.value))
		if !slices.Contains(allowed, v) {
			return "", fmt.Errorf("%s: must be one of %s; got %q", s.name, strings.Join(allowed, ", "), s.value)
		}
		return v, nil
	}
	return "", nil
}

// logger returns the stderr logger for the settings in force; when they
// are bad (reported elsewhere), the text default.
func (c *cli) logger() *slog.Logger {
	s, err := c.logSettings()
	if err != nil {
		s = config.Log{Format: "text", Level: "info"}
	}
	return newLogger(s, c.stderr)
}

// jsonLogs reports whether stderr carries JSON log records.
func (c *cli) jsonLogs() bool {
	s, err := c.logSettings()
	return err == nil && s.Format == "json"
}

// reportFailure says on stderr why the command failed: the error as it is
// in text mode (a config's "file:line: message" lines stay readable), one
// JSON record in JSON mode.
func (c *cli) reportFailure(cmd *cobra.Command, err error, code int) {
	if !c.jsonLogs() {
		fmt.Fprintln(c.stderr, err)
		return
	}
	command := "agent-worker"
	if cmd != nil {
		command = cmd.CommandPath()
	}
	c.logger().Error("command failed", "command", command, "error", err.Error(), "exit_code", code)
}

// newLogger returns a logger writing c's format at c's level to w, with
// durations as strings and dollar amounts in micro-dollars (replaceAttr).
func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level)) // checked by logSettings or the config
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: replaceAttr}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// replaceAttr renders values for people and log pipelines alike:
//
//   - a time.Duration (or config.Duration) as its String ("15s", "1m30s"),
//     not JSON's nanosecond count;
//   - a float whose key ends in "usd" ("cost_usd", "spent_usd") rounded to
//     micro-dollars (6 decimals), so sums of float prices do not print as
//     0.30000000000000004.
func replaceAttr(_ []string, a slog.Attr) slog.Attr {
	switch v := a.Value; v.Kind() {
	case slog.KindDuration:
		return slog.String(a.Key, v.Duration().String())
	case slog.KindFloat64:
		if strings.HasSuffix(strings.ToLower(a.Key), "usd") {
			return slog.Float64(a.Key, microUSD(v.Float64()))
		}
	case slog.KindAny:
		if d, ok := v.Any().(config.Duration); ok {
			return slog.String(a.Key, time.Duration(d).String())
		}
	}
	return a
}

// microUSD rounds a dollar amount to micro-dollars.
func microUSD(usd float64) float64 {
	if math.IsNaN(usd) || math.IsInf(usd, 0) {
		return usd
	}
	return math.Round(usd*1e6) / 1e6
}
