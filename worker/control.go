package worker

import (
	"context"
	"fmt"

	"github.com/agent-worker/agent-worker/api"
	"github.com/agent-worker/agent-worker/control"
)

// serveControl listens on every agent's control subject. Every replica
// does, and answers for the agents it owns only; verbs sent to any
// replica (HTTP or NATS) reach the owner.
func (w *Worker) serveControl(s *starting) error {
	cfg, o, subjects := s.cfg, s.o, s.subjects
	holder := holderName(cfg)
	// One token set for the API and the control subject: a reload
	// (ReloadTokens) reaches both at once.
	var err error
	if w.tokens, err = loadTokens(cfg.API.Tokens); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	w.ctl, err = control.New(control.Options{Driver: w.driver, Guard: w.guard, Scheduler: s.sched, Owner: &w.owner,
		Holder: holder, Conn: w.conn.NC, Subjects: subjects, Log: o.Log,
		Tokens: w.tokens, Seal: w.seal, LoopbackNATS: w.conn.Embedded && cfg.NATS.EmbeddedOnLoopback(),
		View: api.LocalView(api.ViewOptions{Driver: w.driver, Guard: w.guard, Scheduler: s.sched, Subagents: w.subagents, Holder: holder})})
	if err != nil {
		return err
	}
	w.control, err = w.ctl.ServeNATS()
	if err != nil {
		return fmt.Errorf("serve %s: %w", subjects.AllControl(), err)
	}
	return nil
}

func (w *Worker) stopControl(context.Context) {
	if w.control != nil {
		_ = w.control.Unsubscribe()
	}
}
