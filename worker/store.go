package worker

import (
	"context"

	"github.com/agent-worker/agent-worker/seal"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/open"
)

// startStore opens the state store (package open); a wrong store.url or
// store.tls is ErrConfig (classify).
func (w *Worker) startStore(s *starting) error {
	st, err := open.Store(s.ctx, s.cfg.Store, s.cfg.NATS.Replicas, w.conn.JS, s.o.Log)
	if err != nil {
		return classify(err)
	}
	// Every round trip to the store is counted, once the metrics exist
	// (agent_worker_store_operations_total).
	w.store = store.Observed(st, func(op string, err error) {
		if m := w.storeOps.Load(); m != nil {
			m.StoreOperation(op, store.Outcome(err))
		}
	})
	return nil
}

func (w *Worker) closeStore(context.Context) {
	if w.store != nil {
		_ = w.store.Close()
	}
}

// loadSeal loads the deployment's sealing key: what the worker publishes
// with a meaning a stranger must not claim carries its seal.
func (w *Worker) loadSeal(s *starting) error {
	var err error
	w.seal, err = seal.Load(s.ctx, w.store)
	return err
}

// Redact hides a password in a URL (also in multi-host Redis URLs that
// net/url cannot parse). The store opener does it (open.Redact).
func Redact(raw string) string { return open.Redact(raw) }
