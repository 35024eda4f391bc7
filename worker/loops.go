package worker

import (
	"context"

	"github.com/agent-worker/agent-worker/inbox/natsinbox"
)

// runLoops binds the agents to their input log and starts their loops.
func (w *Worker) runLoops(s *starting) error {
	ctx, cfg, o := s.ctx, s.cfg, s.o
	var err error
	w.binding, err = natsinbox.Start(ctx, w.conn.NC, w.conn.JS, logAgents(cfg, w.driver), natsinbox.Options{
		Subjects: s.subjects, Stream: cfg.NATS.Stream, MaxBytes: cfg.NATS.MaxMessageBytes, DuplicateWindow: cfg.NATS.DuplicateWindow.D(),
		Store: w.store, Events: w.bus, Log: o.Log, Clock: o.Clock, Leased: true, Seal: w.seal, ReadAheadBytes: cfg.NATS.ReadAheadBytes,
		Holder: holderName(cfg), Live: w.replicaLive,
	})
	if err != nil {
		return err
	}
	if w.conn.JS != nil {
		w.driver.SetInput(w.binding) // before the loops start: they read it
	}
	loops, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w.cancel = cancel
	return w.driver.Start(loops)
}

// stopLoops stops the input, then the loops.
func (w *Worker) stopLoops(context.Context) {
	if w.binding != nil {
		w.binding.Stop()
	}
	if w.cancel != nil {
		w.cancel()
	}
}
