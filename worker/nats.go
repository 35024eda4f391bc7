package worker

import (
	"context"
	"fmt"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/driver"
	"github.com/agent-worker/agent-worker/inbox/natsinbox"
	"github.com/agent-worker/agent-worker/natsbus"
)

// connectNATS connects to NATS, embedded or external.
func (w *Worker) connectNATS(s *starting) error {
	var err error
	w.conn, err = natsbus.Connect(s.cfg.NATS, s.cfg.DataDir, s.o.Log)
	if err != nil {
		return classify(err)
	}
	w.conn.Allow(publisherSubjects(s.cfg))
	return nil
}

// publisherSubjects are the agents' subscribe: subjects, which publishers
// on the embedded server may publish to, and their publish: subjects (the
// agents' output), which they may read (natsbus.Conn.Allow).
func publisherSubjects(cfgs ...*config.Config) (publish, read []string) {
	for _, cfg := range cfgs {
		for _, a := range cfg.Agents {
			for _, s := range a.Subscribe {
				publish = append(publish, s.Subject)
			}
			read = append(read, a.Publish...)
		}
	}
	return publish, read
}

func (w *Worker) closeNATS(context.Context) {
	if w.conn != nil {
		w.conn.Close()
	}
}

// ensureStreams readies the JetStream streams: the input stream and the
// dead letters'.
func (w *Worker) ensureStreams(st *starting) error {
	ctx, cfg, o, subjects := st.ctx, st.cfg, st.o, st.subjects
	if w.conn.JS == nil {
		o.Log.Warn("without JetStream dead letters are published on <prefix>.<agent>.dlq but not kept: only a subscriber at that moment sees them")
		return nil
	}
	// The input stream is the agents' log (package natsinbox): limits
	// retention, read with direct gets, purged below the agents'
	// cursors; a full subject or stream refuses its publisher rather
	// than dropping what waits.
	perSubject, maxBytes, maxAge := cfg.NATS.InputLimits()
	spec := natsbus.StreamSpec{Name: cfg.NATS.Stream, DuplicateWindow: cfg.NATS.DuplicateWindow.D(), Replicas: cfg.NATS.Replicas,
		Subjects: []string{subjects.AllInboxes(), subjects.AllDeferred()}, Limits: true, AllowDirect: true, DiscardNew: true,
		MaxMsgsPerSubject: perSubject, MaxBytes: maxBytes, MaxAge: maxAge}
	if maxAge == 0 {
		spec.MaxAge = -1 // none: a message stays until handled
	}
	for _, a := range cfg.Agents {
		for _, s := range a.Subscribe {
			spec.Subjects = append(spec.Subjects, s.Subject)
		}
	}
	// A stream of the layout before the log (a consumer per agent) is
	// converted first, keeping every agent's place (upgrade.go).
	if err := natsinbox.Upgrade(ctx, w.conn.JS, cfg.NATS.Stream, logAgents(cfg, nil), subjects, w.store, o.Log); err != nil {
		return err
	}
	if _, err := natsbus.EnsureStream(ctx, w.conn.JS, spec, o.Log); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	dlq := natsinbox.DeadLetterStream(cfg.NATS.Stream+"_DLQ", subjects, cfg.NATS.DLQMaxAge.D(), cfg.NATS.DLQMaxBytes, cfg.NATS.Replicas)
	if _, err := natsbus.EnsureStream(ctx, w.conn.JS, dlq, o.Log); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	w.deadLetters = &natsinbox.DeadLetters{JS: w.conn.JS, Stream: dlq.Name, Subjects: subjects}
	return nil
}

// logAgents are the agents as the input log needs them; d supplies their
// loops (nil: none, for the upgrade, which needs only their inputs).
func logAgents(cfg *config.Config, d *driver.Driver) []natsinbox.Agent {
	out := make([]natsinbox.Agent, 0, len(cfg.Agents))
	for _, a := range cfg.Agents {
		la := natsinbox.Agent{Name: a.Name, Subscribe: a.Subscribe}
		if d != nil {
			la.Target, _ = d.Agent(a.Name)
		}
		out = append(out, la)
	}
	return out
}
