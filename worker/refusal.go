package worker

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agent-worker/agent-worker/natsbus"
)

// refusal remembers the input stream's last refusal of one of the
// worker's own publishes (natsbus.ErrFull), so /readyz can say that a
// bound bites while it does. It is not a readiness failure: the worker
// still serves, the agents drain their backlogs, the publisher was told.
type refusal struct {
	mu   sync.Mutex
	at   time.Time
	last *natsbus.FullError
	what string
	n    int
}

// refusalShown is how long /readyz names a refusal after the last one.
const refusalShown = 5 * time.Minute

// note records err if it is a refusal of the input stream, counts it,
// and returns err as natsbus.Full shapes it.
func (w *Worker) noteRefusal(err error, what string) error {
	err = natsbus.Full(err)
	var full *natsbus.FullError
	if !errors.As(err, &full) {
		return err
	}
	if w.metrics != nil {
		w.metrics.InputRefused(full.Reason)
	}
	w.log.Warn("the input stream refused a publish: a bound it keeps is reached", "what", what, "reason", full.Reason, "error", full.Detail)
	r := &w.refused
	r.mu.Lock()
	r.at, r.last, r.what = time.Now(), full, what
	r.n++
	r.mu.Unlock()
	return err
}

// refusals describes the last refusal while it is recent, for /readyz's
// detail ("" none).
func (w *Worker) refusals() string {
	r := &w.refused
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 || time.Since(r.at) > refusalShown {
		return ""
	}
	return fmt.Sprintf("the input stream refused %d publish(es), the last %s ago (%s): %s; the publishers were told, nothing waiting was dropped",
		r.n, time.Since(r.at).Round(time.Second), r.what, r.last.Bound())
}
