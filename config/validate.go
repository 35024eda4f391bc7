package config

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
)

// KnownTools are the built-in tool names an agent's tools list may grant.
var KnownTools = []string{"schedule_next_turn", "report_done", "publish", "http_get", "spawn_subagent", "stop_subagent"}

var (
	providers       = []string{"scripted", "openai", "gemini", "anthropic"}
	behaviours      = []string{"demo"}
	logFormats      = []string{"text", "json"}
	logLevels       = []string{"debug", "info", "warn", "error"}
	storeSchemes    = []string{"nats", "redis", "rediss", "redis+sentinel", "rediss+sentinel", "redis+cluster", "rediss+cluster", "memory"}
	tokenRoles      = []string{"read", "ingest", "operate"}
	subscribeModes  = []string{"inbox", "deferred"}
	overlapPolicies = []string{"skip", "queue", "replace"}
	watchdogModes   = []string{"off", "warn", "feedback", "enforce"}
	// natsReplicas are the replica counts nats.replicas allows: JetStream
	// takes up to 5, and an even count tolerates no more lost servers
	// than the odd count below it.
	natsReplicas = []int{1, 3, 5}

	// namePattern is the shape of agent and schedule names: they become
	// NATS subject tokens and metric label values.
	namePattern = regexp.MustCompile(`^[a-z0-9_-]+$`)
)

// Validate checks c as Load does, for a Config built or changed in code.
// It expects defaults to be applied (Default and Load do that): a zero
// inbox cap, for example, is an error here. Problems are returned as
// *Errors; their lines are 0 except for script steps, which carry their
// own, because the YAML's line map is gone by now.
func (c *Config) Validate() error {
	v := validator{file: c.File}
	v.config(c)
	return finish(c.File, v.errs)
}

// validator reports problems by field path; lines maps a path to its line
// and a problem falls back to the nearest parent that has one.
type validator struct {
	file   string
	lines  map[string]int
	failed map[string]bool
	errs   []Error
}

func (v *validator) line(p path) int {
	for n := len(p); n >= 0; n-- {
		if l, ok := v.lines[p[:n].String()]; ok {
			return l
		}
	}
	return 0
}

// at reports a problem at p, unless p or a parent could not be decoded (the
// decoder has said so already, and the zero value left behind would only
// add noise).
func (v *validator) at(p path, format string, args ...any) {
	v.atLine(v.file, v.line(p), p, format, args...)
}

func (v *validator) atLine(file string, line int, p path, format string, args ...any) {
	for n := len(p); n >= 0; n-- {
		if v.failed[p[:n].String()] {
			return
		}
	}
	v.errs = append(v.errs, Error{File: file, Line: line, Msg: p.String() + ": " + fmt.Sprintf(format, args...)})
}

func (v *validator) oneOf(p path, got string, allowed []string) {
	switch {
	case slices.Contains(allowed, got):
	case got == "":
		v.at(p, "required: one of %s", strings.Join(allowed, ", "))
	default:
		v.at(p, "must be one of %s; got %q", strings.Join(allowed, ", "), got)
	}
}

func (v *validator) duration(p path, d Duration) {
	if d < 0 {
		v.at(p, "must not be negative; got %s", d)
	}
}

// nonNegative refuses a negative amount, and one that is not a finite
// number (YAML's .inf and .nan): a ceiling or price of +Inf would make
// every sum and every JSON answer with it fail.
func (v *validator) nonNegative(p path, f float64) {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		v.at(p, "must be a finite number; got %v", f)
	case f < 0:
		v.at(p, "must not be negative; got %v", f)
	}
}

func (v *validator) atLeastOne(p path, n int) {
	if n < 1 {
		v.at(p, "must be at least 1; got %d", n)
	}
}
