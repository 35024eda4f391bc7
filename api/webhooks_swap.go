package api

import (
	"fmt"
	"maps"
)

// webhookTable is what the generic webhooks and the Alertmanager
// receiver route by: the webhooks, parsed, and the agents an all-resolved
// notification wakes. It is replaced whole (SetWebhooks) and never
// modified once stored: a request reads it once and is served by that
// table to its end, its metrics included.
type webhookTable struct {
	hooks          map[string]*hook
	wakeOnResolved map[string]bool
}

// newWebhookTable checks and parses hooks for the agents the driver has.
func (s *Server) newWebhookTable(hooks map[string]Webhook, wakeOnResolved map[string]bool) (*webhookTable, error) {
	parsed, err := newHooks(s.driver, hooks)
	if err != nil {
		return nil, err
	}
	return &webhookTable{hooks: parsed, wakeOnResolved: maps.Clone(wakeOnResolved)}, nil
}

// webhooks is the table in force.
func (s *Server) webhooks() *webhookTable { return s.routing.Load() }

// SetWebhooks replaces the generic webhooks (Options.Webhooks) and the
// agents an all-resolved Alertmanager notification wakes
// (Options.WakeOnResolved), as a config reload changes them. The change
// is atomic: a request already being served finishes with the table it
// started with (a removed webhook's request in flight is answered and
// counted as before); every request that starts afterwards sees the new
// one, so a removed webhook answers 404 and an added one is served. An
// error (a webhook whose agent the driver lacks, an unknown format, a
// template that does not parse) keeps the table in force whole.
//
// The metrics' label bound is not the API's business: the caller makes
// the new webhooks' series (metrics.Metrics.SetWebhooks).
func (s *Server) SetWebhooks(hooks map[string]Webhook, wakeOnResolved map[string]bool) error {
	t, err := s.newWebhookTable(hooks, wakeOnResolved)
	if err != nil {
		return fmt.Errorf("api: webhooks not changed: %w", err)
	}
	s.routing.Store(t)
	return nil
}
