package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/agent-worker/agent-worker/access"
	"github.com/agent-worker/agent-worker/clock"
	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/control"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/events"
	"github.com/agent-worker/agent-worker/guard"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/scheduler"
)

// Defaults of Options.
const (
	DefaultListen      = "127.0.0.1:8080"
	DefaultMaxBody     = config.MaxAPIBodyBytes
	DefaultDedupWindow = 10 * time.Minute
	DefaultHeartbeat   = 15 * time.Second
	// DefaultAlertmanagerMaxBytes bounds an Alertmanager payload
	// (api.alertmanager_max_bytes).
	DefaultAlertmanagerMaxBytes = 4 << 20
	// DefaultMaxMessageBytes bounds a queued message as EncodeMessage
	// writes it (nats.max_message_bytes).
	DefaultMaxMessageBytes = 64 << 10
	// DefaultMaxInflightBytes bounds the request bodies a Server holds at
	// once (api.max_inflight_bytes). 16 MiB admits four maximal
	// Alertmanager payloads (DefaultAlertmanagerMaxBytes) at once, or 256
	// maximal bodies of the other routes; a fifth large notification is
	// answered 503 and Alertmanager retries it. Not more, because a
	// notification costs about ten times its size while it is decoded and
	// rendered: 16 concurrent 3.9 MB ones took a worker from 53 MB to
	// 710 MB of resident memory without a cap, to 231 MB with this one;
	// 64 MiB would have admitted all 16.
	DefaultMaxInflightBytes = 16 << 20
	// DefaultGroupMemory is how long the state of an Alertmanager group
	// (its last notification) is remembered: as long as a handled id.
	DefaultGroupMemory = 24 * time.Hour
)

// Options configure a Server. Zero values take the documented defaults.
type Options struct {
	// Listen is the address ListenAndServe listens on; default
	// DefaultListen. Without Tokens it must be loopback (127.0.0.0/8, ::1
	// or "localhost").
	Listen string
	// Tokens are the accepted bearer tokens; SetTokens replaces them
	// while the server runs. None: every request is accepted, which New
	// allows on loopback only.
	Tokens []Token
	// Access, when set, holds the accepted tokens instead of Tokens (which
	// must then be empty): the server authenticates against the set it
	// holds, and SetTokens replaces that set, so every transport given
	// the same Access (the NATS control subject: control.Options.Tokens)
	// sees a rotation at once.
	Access *access.Tokens
	// OpenPaths are served without a token (exact paths). nil means
	// /healthz, /readyz and /metrics; an empty non-nil slice means none.
	OpenPaths []string
	// Driver is required.
	Driver *driver.Driver
	// Guard serves guardrail status and resets; nil: agents show no
	// spend and resets answer 404.
	Guard *guard.Guard
	// Scheduler fires schedules on request; default Driver.Scheduler().
	Scheduler *scheduler.Scheduler
	// Events feeds the event streams; default Driver.Events().
	Events *events.Bus
	// EventFeed, when set, is what the event streams read instead of
	// Events' ring: the worker's durable events stream in JetStream mode
	// (every replica's events, ids that survive restarts).
	EventFeed EventFeed
	// Metrics is served at /metrics; nil answers 404.
	Metrics http.Handler
	// Ready returns why the worker is not ready (NATS down, store
	// unreachable); empty or nil means ready.
	Ready func() []string
	// Degraded returns what works less well without making the worker
	// unready (an MCP server down: its tools answer with an error); /readyz
	// lists it with a 200.
	Degraded func() []string
	// DeadLetters serves GET /v1/agents/{name}/dlq and replay; nil
	// (core NATS mode): they answer 404, dead letters are not kept.
	DeadLetters DeadLetterStore
	Log         *slog.Logger // default: discard
	Clock       clock.Clock  // default: clock.Real()
	// MaxBody caps request bodies (413 beyond) except an Alertmanager
	// payload's; default DefaultMaxBody.
	MaxBody int64
	// AlertmanagerMaxBytes caps an Alertmanager payload (413 beyond,
	// api.alertmanager_max_bytes); default DefaultAlertmanagerMaxBytes.
	AlertmanagerMaxBytes int64
	// MaxInflightBytes caps the request bodies this Server holds at once
	// (api.max_inflight_bytes); default DefaultMaxInflightBytes. New
	// refuses one below MaxBody or AlertmanagerMaxBytes, which no single
	// request of that size could then pass.
	MaxInflightBytes int64
	// MaxMessageBytes caps a queued message as EncodeMessage writes it
	// (nats.max_message_bytes: what Deliver publishes must pass the NATS
	// binding's limit): a message over it is answered 413, and an
	// Alertmanager notification is rendered with as many alerts as fit.
	// Default DefaultMaxMessageBytes.
	MaxMessageBytes int
	// DedupWindow is how long a message or Alertmanager notification id
	// is remembered per agent; default DefaultDedupWindow.
	DedupWindow time.Duration
	// Heartbeat is the interval of the comment lines that keep event
	// streams alive through proxies; default DefaultHeartbeat.
	Heartbeat time.Duration
	// ResolvedWakes makes an all-resolved Alertmanager notification wake
	// every agent; by default it is deferred to the next turn.
	ResolvedWakes bool
	// WakeOnResolved names the agents an all-resolved Alertmanager
	// notification wakes (agents[].wake_on_resolved), besides
	// ResolvedWakes. SetWebhooks replaces it.
	WakeOnResolved map[string]bool
	// Deliver, when set, queues messages that arrive over HTTP (messages,
	// Alertmanager) — for example by publishing them to the agent's NATS
	// subject, so they are durable and reach whichever replica owns the
	// agent. Nil: straight into the agent's inbox in this process. It
	// returns an error wrapping ErrDuplicate when the transport already
	// holds a message with m.ID (JetStream's duplicate window): the
	// request is answered duplicate, not 503.
	Deliver func(ctx context.Context, agent string, m inbox.Message) error
	// Observer, when set, is told about every request (metrics).
	Observer Observer
	// Webhooks are the generic webhooks by name (webhooks.<name>),
	// served at POST /v1/webhooks/{name} (webhooks.go). New refuses one
	// whose agent the driver lacks or whose templates do not parse.
	// SetWebhooks replaces them.
	Webhooks map[string]Webhook
	// Control carries the operator verbs and the agent views to each
	// agent's owner (control.Control.Do): the worker's forwards them over
	// NATS to whichever replica owns the agent, so every replica answers
	// with the owner's result, and 503 when no owner answers. Nil: a
	// local one over Driver, Guard and Scheduler in which this process
	// owns every agent.
	Control *control.Control
	// Subagents is the subagent manager (background.Manager). Its
	// Running counts each agent's subagents in the views this server
	// builds itself (Control nil; the worker hands it to its Control's
	// view, LocalView, instead, so the count is the owner's); when it
	// also implements Subagents it serves the subagent routes. Nil: 0,
	// and the subagent routes answer 404.
	Subagents SubagentCounter
	// Holder names this replica (lease.holder): served_by in every view,
	// and the owner in the views it builds itself.
	Holder string
	// Replicas lists the live replicas, this one first (GET
	// /v1/replicas). Nil: this replica alone, owning the agents its
	// driver does not hold in standby.
	Replicas func() []Replica
	// Reload serves POST /v1/reload (reload.go). Nil: 501.
	Reload Reloader
}

// ErrDuplicate is what Options.Deliver wraps when the transport recognised
// the message as one it already holds (JetStream's PubAck.Duplicate).
var ErrDuplicate = errors.New("a message with this id is already queued")

// withDefaults fills o's zero values with the documented defaults (o has
// a Driver). It refuses a MaxInflightBytes below the largest body a
// request may carry, because such a request could never be admitted and
// would be answered 503 forever.
func withDefaults(o Options) (Options, error) {
	if o.Listen == "" {
		o.Listen = DefaultListen
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.Scheduler == nil {
		o.Scheduler = o.Driver.Scheduler()
	}
	if o.Events == nil {
		o.Events = o.Driver.Events()
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.AlertmanagerMaxBytes <= 0 {
		o.AlertmanagerMaxBytes = DefaultAlertmanagerMaxBytes
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if o.MaxInflightBytes <= 0 {
		o.MaxInflightBytes = DefaultMaxInflightBytes
	}
	if largest := max(o.MaxBody, o.AlertmanagerMaxBytes); o.MaxInflightBytes < largest {
		return o, fmt.Errorf("api: api.max_inflight_bytes %d is below the largest request body the API takes (%d): no request of that size could ever be admitted", o.MaxInflightBytes, largest)
	}
	if o.DedupWindow <= 0 {
		o.DedupWindow = DefaultDedupWindow
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.OpenPaths == nil {
		o.OpenPaths = []string{"/healthz", "/readyz", "/metrics"}
	}
	return o, nil
}
