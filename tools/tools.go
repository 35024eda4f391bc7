// Package tools holds the built-in tools an agent may be granted in its
// config (schedule_next_turn, report_done, ...). A tool acts only through
// the Host it is given, so it can have no side effect the config did not
// grant; it must not run turns or touch transports itself.
package tools

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"google.golang.org/adk/tool"
)

// Tool names.
const (
	ScheduleNextTurn = "schedule_next_turn"
	ReportDone       = "report_done"
	Publish          = "publish"
)

// Host is what the tools of one agent act on; the driver implements it.
type Host interface {
	// Now is the agent's clock.
	Now() time.Time
	// RequestWake records that the current turn wants the agent woken at
	// at (already clamped). A later request in the same turn replaces it.
	RequestWake(at time.Time, reason string)
	// ReportDone records a completed task and emits an event.
	ReportDone(summary string, details map[string]any)
	// ActionID names the running turn's tool call with function call id
	// call, the same when the turn is resumed from its journal (package
	// journal): a side effect carries it so a repeat is recognisable.
	ActionID(call string) string
}

// Sleep bounds a model-requested wake.
type Sleep struct {
	Min, Max time.Duration
}

// Publisher sends a message on a NATS subject. id, when not empty, is
// the message's idempotency key (Nats-Msg-Id): a stream that captures the
// subject stores one message per id within its duplicate window.
type Publisher interface {
	// Publish sends data to subject with id as its idempotency key; ctx
	// is the tool call's, whose trace context the message carries.
	Publish(ctx context.Context, subject string, data []byte, id string) error
}

// Env is what one agent's tools may act on: nothing beyond it.
type Env struct {
	// Agent is the agent's name (the From of what it publishes).
	Agent string
	Host  Host
	Sleep Sleep
	// Publisher and PublishAllow serve the publish tool: it may send only
	// to subjects matching one of the patterns, and never to a subject
	// internal to the worker (subject.Internal under SubjectPrefix,
	// whatever the patterns say).
	Publisher    Publisher
	PublishAllow []string
	// SubjectPrefix is the worker's nats.subject_prefix; "" means
	// subject.DefaultPrefix.
	SubjectPrefix string
	// Spawner serves spawn_subagent and stop_subagent.
	Spawner Spawner
	// HTTPAllow lists the URL prefixes http_get may read; HTTPClient
	// sets its timeout (default 15s; see below).
	HTTPAllow  []string
	HTTPClient *http.Client
	// HTTPAllowPrivate lets http_get dial loopback, private and CGNAT
	// addresses; link-local (cloud metadata) and unspecified addresses
	// stay refused. HTTPResolver resolves the host names http_get dials
	// (default net.DefaultResolver; tests inject one). http_get always
	// uses its own transport and redirect check, so of HTTPClient it
	// takes only the Timeout (a Transport, CheckRedirect or Jar there is
	// an error).
	HTTPAllowPrivate bool
	HTTPResolver     Resolver
}

// Build returns the named tools bound to env. Unknown names are an error;
// so are tools that are known but not built yet in this version, and
// publish without a publisher.
func Build(names []string, env Env) ([]tool.Tool, error) {
	var out []tool.Tool
	for _, n := range names {
		var t tool.Tool
		var err error
		switch n {
		case ScheduleNextTurn:
			t, err = newScheduleNextTurn(env.Host, env.Sleep)
		case ReportDone:
			t, err = newReportDone(env.Host)
		case Publish:
			t, err = newPublish(env)
		case HTTPGet:
			t, err = newHTTPGet(env)
		case SpawnSubagent:
			t, err = newSpawnSubagent(env.Spawner, env.Host)
		case StopSubagent:
			t, err = newStopSubagent(env.Spawner)
		default:
			return nil, fmt.Errorf("tool %q is not available in this build", n)
		}
		if err != nil {
			return nil, fmt.Errorf("build tool %q: %w", n, err)
		}
		out = append(out, t)
	}
	return out, nil
}
