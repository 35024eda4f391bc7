package worker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/agent-worker/agent-worker/config"
	"github.com/agent-worker/agent-worker/natsbus"
	"github.com/agent-worker/agent-worker/seal"
	"github.com/agent-worker/agent-worker/store"
	"github.com/agent-worker/agent-worker/store/memory"
	"github.com/agent-worker/agent-worker/store/natskv"
	redisstore "github.com/agent-worker/agent-worker/store/redis"
)

// startStore opens the state store.
func (w *Worker) startStore(s *starting) error {
	st, err := openStore(s.ctx, s.cfg.Store, s.cfg.NATS.Replicas, w.conn, s.o.Log)
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

// openStore opens the store cfg names; nats:// buckets keep replicas
// copies (nats.replicas).
func openStore(ctx context.Context, cfg config.Store, replicas int, conn *natsbus.Conn, log *slog.Logger) (store.Store, error) {
	raw := cfg.URL
	scheme, rest, _ := strings.Cut(raw, "://")
	switch scheme {
	case "memory":
		log.Warn("state store is memory://: spend, halts, pauses and history do not survive a restart")
		return memory.New(nil), nil
	case "nats":
		if conn.JS == nil {
			return nil, fmt.Errorf("%w: store.url nats:// needs JetStream (nats.jetstream: true)", ErrConfig)
		}
		return natskv.Open(ctx, conn.JS, natskv.Options{Bucket: strings.Trim(rest, "/"), Replicas: replicas, Log: log})
	case "redis", "rediss", "redis+sentinel", "rediss+sentinel", "redis+cluster", "rediss+cluster":
		tlsCfg, err := tlsConfig(cfg.TLS)
		if err != nil {
			return nil, fmt.Errorf("%w: store.tls: %w", ErrConfig, err)
		}
		s, err := redisstore.Open(ctx, raw, redisstore.Options{PasswordEnv: cfg.PasswordEnv,
			SentinelPasswordEnv: cfg.SentinelPasswordEnv, TLS: tlsCfg, Log: log})
		if err != nil {
			return nil, err
		}
		log.Info("state store is Redis", "url", Redact(raw))
		return s, nil
	}
	return nil, fmt.Errorf("%w: store.url %q: unknown scheme %q (want nats, redis, rediss, redis+sentinel, redis+cluster or memory)", ErrConfig, Redact(raw), scheme)
}

// tlsConfig builds a client TLS config from files; nil when none is set.
func tlsConfig(t config.TLS) (*tls.Config, error) {
	if t.CAFile == "" && t.CertFile == "" && t.KeyFile == "" {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file %s holds no PEM certificate", t.CAFile)
		}
	}
	if t.CertFile != "" || t.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// Redact hides a password in a URL (also in multi-host Redis URLs that
// net/url cannot parse).
func Redact(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	at := strings.LastIndex(rest, "@")
	if slash := strings.Index(rest, "/"); slash >= 0 && slash < at {
		at = strings.LastIndex(rest[:slash], "@")
	}
	if at < 0 {
		return raw
	}
	user := rest[:at]
	if name, _, hasPass := strings.Cut(user, ":"); hasPass {
		user = name + ":xxxxx"
	}
	return scheme + "://" + user + rest[at:]
}
