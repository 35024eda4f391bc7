package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agent-worker/agent-worker/config"

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
	observe := func(op string, err error) {
		if m := w.storeOps.Load(); m != nil {
			m.StoreOperation(op, store.Outcome(err))
		}
	}
	w.store = store.Observed(st, observe)
	renewal, err := w.openRenewal(s, st)
	if err != nil {
		return classify(err)
	}
	w.renewal = store.Observed(renewal, observe)
	return nil
}

// openRenewal opens the store the lease renewals go through: the same
// state as st, over a connection of its own (a NATS connection for
// nats://, a Redis client for redis://), so that a renewal never waits
// behind the bulk of the agents' reads and writes (lease.Options.Renewal).
// The memory store is st itself.
func (w *Worker) openRenewal(s *starting, st store.Store) (store.Store, error) {
	scheme, _, _ := strings.Cut(s.cfg.Store.URL, "://")
	switch scheme {
	case "memory":
		return st, nil
	case "nats":
		nc, js, err := w.conn.Dial("agent-worker-lease-renewal")
		if err != nil {
			return nil, err
		}
		w.renewalNC = nc
		return open.Store(s.ctx, s.cfg.Store, s.cfg.NATS.Replicas, js, s.o.Log.With("for", "lease renewals"))
	}
	return open.Store(s.ctx, s.cfg.Store, s.cfg.NATS.Replicas, nil, s.o.Log.With("for", "lease renewals"))
}

func (w *Worker) closeStore(context.Context) {
	if w.renewal != nil && w.renewal != w.store {
		_ = w.renewal.Close()
	}
	if w.renewalNC != nil {
		w.renewalNC.Close()
	}
	if w.store != nil {
		_ = w.store.Close()
	}
}

// loadSeal loads the deployment's sealing key: what the worker publishes
// with a meaning a stranger must not claim carries its seal. The key comes
// from seal.key_file/key_env, or the data dir's own file; one an older
// worker kept in the store is taken out (seal.Open).
func (w *Worker) loadSeal(s *starting) error {
	src, err := sealSource(s.cfg.Seal)
	if err != nil {
		return classed{ErrConfig, err}
	}
	src.LocalFile = s.cfg.LocalSealFile()
	if src.Key == "" && s.cfg.SharedState() {
		s.o.Log.Warn("seal key is this replica's own (data_dir/seal.key): the state is shared, and replicas with keys of their own refuse each other's forwards and subagent reports; give every replica one key with seal.key_file or seal.key_env ("+seal.MakeHint+")",
			"file", src.LocalFile)
	}
	w.seal, err = seal.Open(s.ctx, src, w.store, s.o.Log)
	if errors.Is(err, seal.ErrBadKey) {
		return classed{ErrConfig, err}
	}
	return err
}

// sealSource reads the configured keys' text (config.ReadSecret).
func sealSource(c config.Seal) (seal.Source, error) {
	var src seal.Source
	var err error
	if src.Key, err = config.ReadSecret("seal.key", c.KeyEnv, c.KeyFile); err != nil {
		return src, fmt.Errorf("%w (%s)", err, seal.MakeHint)
	}
	src.Where = secretWhere("seal.key", c.KeyEnv, c.KeyFile)
	if src.Previous, err = config.ReadSecret("seal.previous_key", c.PreviousKeyEnv, c.PreviousKeyFile); err != nil {
		return src, err
	}
	src.PreviousWhere = secretWhere("seal.previous_key", c.PreviousKeyEnv, c.PreviousKeyFile)
	return src, nil
}

func secretWhere(what, env, file string) string {
	if env != "" {
		return what + "_env " + env
	}
	return what + "_file " + file
}

// Redact hides a password in a URL (also in multi-host Redis URLs that
// net/url cannot parse). The store opener does it (open.Redact).
func Redact(raw string) string { return open.Redact(raw) }
