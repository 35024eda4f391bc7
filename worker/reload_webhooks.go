package worker

import (
	"fmt"
	"reflect"

	"github.com/agent-worker/agent-worker/config"
)

// swapWebhooks gives the API the webhooks and the wake_on_resolved
// agents of applied (the config the reload put in force), in one atomic
// swap: a request in flight finishes with the table it started with. It
// runs after the agents changed, so an added webhook's agent exists. The
// metrics get the added webhooks' series at 0; a removed webhook's
// series keep their last values until the process restarts (its
// requests now answer 404 and are not counted).
//
// When the API refuses the table (a webhook's agent failed to be added)
// the webhooks in force stay, applied says so, and the error is the
// reload's failure.
func (w *Worker) swapWebhooks(cur, applied *config.Config) error {
	if w.api == nil || (reflect.DeepEqual(cur.Webhooks, applied.Webhooks) && reflect.DeepEqual(wakeOnResolved(cur), wakeOnResolved(applied))) {
		return nil
	}
	if err := w.api.SetWebhooks(webhooks(applied), wakeOnResolved(applied)); err != nil {
		applied.Webhooks = cur.Webhooks
		return fmt.Errorf("webhooks: %w", err)
	}
	if w.metrics != nil {
		w.metrics.SetWebhooks(webhookNames(applied))
	}
	w.log.Info("webhooks reloaded: requests from now on are served by the new table", "webhooks", webhookNames(applied),
		"wake_on_resolved", wakeOnResolvedNames(applied))
	return nil
}
