package worker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/inbox"
	"github.com/agent-worker/agent-worker/inbox/natsinbox"
	"github.com/agent-worker/agent-worker/natsbus"
)

// startAPI starts the operator HTTP API on cfg.API.Listen.
func (w *Worker) startAPI(s *starting) error {
	cfg, o := s.cfg, s.o
	var err error
	w.api, err = api.New(api.Options{
		Listen: cfg.API.Listen, Access: w.tokens, OpenPaths: cfg.API.OpenPaths,
		Driver: w.driver, Guard: w.guard, Scheduler: w.driver.Scheduler(), Events: w.bus, EventFeed: w.eventFeed(),
		Control: w.ctl, Subagents: w.subagents, Holder: w.ctl.Holder(), Replicas: w.spread.replicas,
		Metrics: w.metrics.Handler(), Ready: w.notReady, Degraded: w.degraded, DeadLetters: w.deadLetterStore(), Log: o.Log, Clock: o.Clock,
		AlertmanagerMaxBytes: int64(cfg.API.AlertmanagerMaxBytes), MaxInflightBytes: int64(cfg.API.MaxInflightBytes), MaxMessageBytes: cfg.NATS.MaxMessageBytes,
		WakeOnResolved: wakeOnResolved(cfg), Deliver: w.deliver, Observer: w.metrics, Webhooks: webhooks(cfg),
		Reload: w.apiReload,
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	w.metrics.SetHTTPRoutes(w.api.Routes())
	w.metrics.SetWebhooks(webhookNames(cfg))
	l, err := net.Listen("tcp", cfg.API.Listen)
	if err != nil {
		return apiListenError(cfg.API.Listen, err)
	}
	w.apiAddr = l.Addr().String()
	w.apiDone = make(chan struct{})
	go func() {
		defer close(w.apiDone)
		if err := w.api.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			o.Log.Error("operator API stopped", "error", err)
		}
	}()
	return nil
}

// closeAPI waits for the operator API's last requests (a second at most).
func (w *Worker) closeAPI(context.Context) {
	if w.api != nil && w.apiDone != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = w.api.Shutdown(ctx)
		cancel()
		<-w.apiDone
	}
}

// APIAddr is where the operator API listens.
func (w *Worker) APIAddr() string { return w.apiAddr }

// deliver publishes a message that arrived over HTTP to the agent's NATS
// subject, so it is durable (JetStream acknowledges it before the API
// answers 202), deduplicated by its id, and reaches whichever replica owns
// the agent. The body is api.EncodeMessage's, with m.ID as its id; its
// Nats-Msg-Id is natsbus.MsgID(agent, m.ID), because JetStream
// deduplicates Nats-Msg-Id across the whole stream and ids are per agent:
// the same id to another agent is another message. A message that came
// through the Alertmanager receiver carries the Agent-Worker-Via header,
// so the agent wakes with source alertmanager, and every message carries
// its authenticated sender (the Agent-Worker-Sender header: "api, token
// ops"), both sealed with the deployment's key. A publish JetStream
// acknowledges as a duplicate (the stream holds this agent's message with
// that id) returns api.ErrDuplicate: nothing new was queued.
func (w *Worker) deliver(ctx context.Context, agent string, m inbox.Message) error {
	subjects := natsbus.Subjects{Prefix: w.cfg.NATS.SubjectPrefix}
	subject := subjects.Inbox(agent)
	if m.Kind == inbox.Deferred {
		subject = subjects.Deferred(agent)
	}
	data, err := api.EncodeMessage(m)
	if err != nil {
		return err
	}
	dup, err := natsinbox.Publish(ctx, w.conn, w.seal, natsinbox.Own{
		Subject: subject, Agent: agent, ID: m.ID, Data: data,
		Via: m.Via, Sender: m.Sender, TraceParent: m.TraceParent,
	})
	if err != nil {
		return w.noteRefusal(err, "a message over the API to "+agent)
	}
	if dup {
		return fmt.Errorf("stream %s: %w", w.cfg.NATS.Stream, api.ErrDuplicate)
	}
	return nil
}

// deadLetterStore is the API's dead-letter store: nil in core NATS mode.
func (w *Worker) deadLetterStore() api.DeadLetterStore {
	if w.deadLetters == nil {
		return nil
	}
	return replays{w}
}

// replays is the dead-letter store whose replays that the input stream
// refuses are noted as its other refusals are (refusal.go).
type replays struct{ w *Worker }

func (r replays) List(ctx context.Context, agent string, limit int) ([]natsinbox.DeadLetter, error) {
	return r.w.deadLetters.List(ctx, agent, limit)
}

func (r replays) Replay(ctx context.Context, agent string, seq uint64) (natsinbox.DeadLetter, error) {
	dl, err := r.w.deadLetters.Replay(ctx, agent, seq)
	if err != nil {
		err = r.w.noteRefusal(err, "a dead-letter replay to "+agent)
	}
	return dl, err
}

// degraded lists what works less well without making the worker unready:
// a NATS that exposes the worker's state to clients without credentials,
// a recent refusal of its publishes, lease renewals that are late (the
// process starved or cut off: its agents are let go if it goes on), the
// MCP servers that are down (their tools answer with an error).
func (w *Worker) degraded() []string {
	var out []string
	if e := w.exposure(); e != "" {
		out = append(out, e)
	}
	if r := w.refusals(); r != "" {
		out = append(out, r)
	}
	if w.leases != nil {
		if why := w.leases.Lagging(); why != "" {
			out = append(out, why)
		}
	}
	if w.mcp == nil {
		return out
	}
	for _, st := range w.mcp.Down() {
		out = append(out, fmt.Sprintf("MCP server %s down since %s: %s (its tools answer with an error; reconnecting)", st.Server, st.Since.UTC().Format(time.RFC3339), st.Error))
	}
	return out
}
