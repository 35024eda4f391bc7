package config

import (
	"cmp"
	"fmt"
	"slices"
)

// Warning is something a configuration loads with but that does not work
// as written: a key that is ignored now or does less than it did, or a
// setting whose cost is easy to miss. It never stops a load; validate
// prints each (and fails only with --strict), run logs each at start.
type Warning struct {
	// File and Line are where the key is written: the configuration file
	// and the line of the nearest key of Path it has (0 when it has
	// none); File is "" for a Config not read from a file.
	File string
	Line int
	// Path is the field path as validate writes it: "nats.ack_wait".
	Path string
	// Msg says what happens instead, and what to do.
	Msg string
}

// String formats w as validate prints it: "file:line: path: warning:
// message", leaving out what is unknown, on one line (as Error).
func (w Warning) String() string {
	return Error{File: w.File, Line: w.Line, Msg: w.Path + ": warning: " + w.Msg}.Error()
}

// WarningAt is a Warning about the field at path, placed as Where places
// it.
func (c *Config) WarningAt(path, msg string) Warning {
	return Warning{File: c.File, Line: c.line(path), Path: path, Msg: msg}
}

// deprecatedKeys are keys that older files set and that no longer do
// what they did: each is warned about when the file writes it, never
// because a default fills it.
var deprecatedKeys = []struct{ path, msg string }{
	{"nats.ack_wait", "agents' input no longer has an ack deadline: a new owner reads on from the agent's cursor as soon as it holds the lease (lease.ttl); nats.ack_wait now only bounds how soon a crashed replica's subagent jobs are redelivered"},
	{"nats.max_consumers", "agents no longer hold consumers on nats.stream (one router per replica reads the stream); the key is ignored"},
	{"nats.handled_ids", "handled messages are no longer recorded by id: a message is handled when it is at or below its agent's cursor; the key is ignored"},
}

// Warnings are the warnings c's own keys call for, in file order: each
// deprecated key the file writes, and a nats.max_age, under which input
// an agent has not handled in time is lost. (A warning that needs a
// runtime package, such as the price of a model, is its caller's.)
func (c *Config) Warnings() []Warning {
	var out []Warning
	for _, k := range deprecatedKeys {
		if c.Written(k.path) {
			out = append(out, c.WarningAt(k.path, k.msg))
		}
	}
	if d := c.NATS.MaxAge; d > 0 {
		out = append(out, c.WarningAt("nats.max_age", fmt.Sprintf("a message older than %s is removed from nats.stream unhandled: an agent that is paused, halted or without an owner for that long loses its input; 0 keeps every message until it is handled", d)))
	}
	slices.SortStableFunc(out, func(a, b Warning) int { return cmp.Compare(a.Line, b.Line) })
	return out
}
