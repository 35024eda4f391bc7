package worker

import (
	"strings"

	"github.com/agent-worker/agent-worker/store/open"
)

// probeExposure checks, once at start, what a NATS client without
// credentials could do that only the worker may (natsbus.ProbeAnonymous):
// read or watch the state bucket, read the control requests or the
// worker's own replies. Anything found is logged as an ERROR naming it,
// listed in /readyz's degraded and set in agent_worker_state_exposed;
// the worker still starts (the operator may be mid-migration). A probe
// that cannot be made is a WARN, not a failed start.
func (w *Worker) probeExposure(s *starting) error {
	if w.conn.JS == nil && s.cfg.NATS.URL == "" {
		return nil // core NATS mode embedded: no JetStream to expose
	}
	found, err := w.conn.ProbeAnonymous(s.cfg.NATS, open.StateBucket(s.cfg.Store.URL))
	if err != nil {
		s.o.Log.Warn("could not check what a NATS client without credentials can reach", "error", err)
		return nil
	}
	w.metrics.StateExposed(len(found) > 0)
	if len(found) == 0 {
		return nil
	}
	why := "NATS lets clients without credentials " + strings.Join(found, "; ") +
		": they can read or forge the worker's state and operator verbs; deny other clients $JS.API.>, $KV.>, the control subjects and _AW_INBOX.> (docs/operations.md: NATS as a trust boundary)"
	w.exposed.Store(&why)
	s.o.Log.Error("state exposed: "+why, "url", w.conn.ClientURL)
	return nil
}

// exposure is why the worker's NATS is exposed, or "" (probeExposure).
func (w *Worker) exposure() string {
	if p := w.exposed.Load(); p != nil {
		return *p
	}
	return ""
}
