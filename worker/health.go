package worker

import (
	"context"
	"errors"

	"github.com/agent-worker/agent-worker/health"
	"github.com/agent-worker/agent-worker/natsbus"
	"github.com/agent-worker/agent-worker/store"
)

// initHealth makes the monitor of the worker's dependencies; startHealth
// starts its probes.
func (w *Worker) initHealth(s *starting) error {
	w.health = newHealth(w.conn, w.store, s.o)
	return nil
}

func (w *Worker) stopHealth(context.Context) {
	if w.health != nil {
		w.health.Stop()
	}
}

// startHealth starts the health probes; the driver resumes when the
// dependencies are back.
func (w *Worker) startHealth(*starting) error {
	w.health.OnChange(func(up bool) {
		if up {
			w.driver.Recovered()
		}
	})
	w.health.Start()
	return nil
}

// newHealth probes what a turn needs: the NATS connection, the embedded
// server's JetStream storage, and the state store.
func newHealth(conn *natsbus.Conn, st store.Store, o Options) *health.Monitor {
	return health.New(health.Options{Clock: o.Clock, Log: o.Log},
		health.Check{Name: "nats", Probe: func(context.Context) error { return conn.Ready() }},
		health.Check{Name: "jetstream_storage", Probe: func(context.Context) error { return conn.StorageErr() }},
		health.Check{Name: "store", Probe: func(ctx context.Context) error {
			if _, err := st.Get(ctx, "ready.probe"); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			return nil
		}},
	)
}

// Health returns the monitor of the worker's dependencies.
func (w *Worker) Health() *health.Monitor { return w.health }

// notReady lists why the worker cannot serve — NATS, its JetStream
// storage or the store down — from the health monitor's last probes, so
// /readyz answers at once however hung a dependency is.
func (w *Worker) notReady() []string { return w.health.Problems() }
